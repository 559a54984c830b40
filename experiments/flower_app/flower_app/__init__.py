"""flower_app: an MLP on scikit-learn's digits, federated with Flower."""
