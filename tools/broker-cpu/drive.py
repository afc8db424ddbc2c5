"""The fixed workload of measure.sh: cycles of push N / wildcard pop N / ack N, N = $BATCH or 100
(the shape of scenarios/vs-peers.toml at 100, of drain-pop1's requests at 1: 128-byte payloads, a
transactionId each, one pop's batch acked whole).

Usage: drive.py PORT setup | drive.py PORT CYCLES
"""
import http.client
import json
import os
import sys
import uuid

PORT = int(sys.argv[1])
BATCH = int(os.environ.get("BATCH", "100"))
conn = http.client.HTTPConnection("127.0.0.1", PORT)


def call(method, path, body=None):
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
    headers = {"content-type": "application/json"} if data else {}
    conn.request(method, path, body=data, headers=headers)
    answer = conn.getresponse()
    return answer.status, answer.read()


def setup():
    options = {"leaseTime": 30, "dedupWindowSeconds": 0}
    status, text = call("POST", "/api/v1/configure", {"queue": "vspeers", "options": options})
    assert status == 200, (status, text[:200])


def cycle(number, seq):
    items = [
        {
            "queue": "vspeers",
            "partition": "p%d" % (number % 16),
            "transactionId": str(uuid.uuid4()),
            "payload": {"seq": seq + i, "pad": "x" * 100},
        }
        for i in range(BATCH)
    ]
    status, text = call("POST", "/api/v1/push", {"items": items})
    assert status == 201, (status, text[:200])
    status, text = call("GET", "/api/v1/pop/queue/vspeers?batch=%d&partitions=1&wait=false" % BATCH)
    assert status == 200, (status, text[:200])
    messages = json.loads(text)["messages"]
    assert len(messages) == BATCH, len(messages)
    acks = [
        {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "leaseId": m["leaseId"],
            "status": "completed",
        }
        for m in messages
    ]
    status, text = call("POST", "/api/v1/ack/batch", {"acknowledgments": acks})
    assert status == 200, (status, text[:200])
    assert all(r["success"] for r in json.loads(text)), text[:200]


if sys.argv[2] == "setup":
    setup()
else:
    for n in range(int(sys.argv[2])):
        cycle(n, n * BATCH)
