import numpy as np
from flwr.app import ArrayRecord, Message, RecordDict
from flwr.common.serde import message_to_proto
from flwr.serverapp import ServerApp

from echo_app import SEEN

app = ServerApp()


@app.main()
def main(grid, context):
    cfg = context.run_config
    nodes = sorted(grid.get_node_ids())
    for r in range(int(cfg["rounds"])):
        odd = int(cfg["odd-node"])   # left out of round 1, alone in round 2
        to = [n for i, n in enumerate(nodes)
              if (r == 0) or (r == 1 and i != odd) or (r == 2 and i == odd)]
        msgs = [Message(RecordDict({"x": ArrayRecord([np.zeros(int(cfg["down-floats"]), np.float32)])}),
                        n, "train", group_id=str(r)) for n in to]
        replies = grid.send_and_receive(msgs, timeout=float(cfg["timeout"]))
        SEEN["server"].append({m.metadata.src_node_id: message_to_proto(m).ByteSize()
                               for m in replies})
        if r == int(cfg["server-raises-after"]):
            raise RuntimeError("the strategy lost its state")
