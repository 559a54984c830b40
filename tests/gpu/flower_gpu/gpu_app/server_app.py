from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.serverapp import ServerApp

app = ServerApp()


@app.main()
def main(grid, context):
    for r in range(int(context.run_config["rounds"])):
        msgs = [Message(RecordDict({"config": ConfigRecord({"round": r})}), n, "train",
                        group_id=str(r)) for n in sorted(grid.get_node_ids())]
        replies = grid.send_and_receive(msgs, timeout=60.0)
        assert all(isinstance(m.content["arrays"], ArrayRecord) for m in replies
                   if not m.has_error())
