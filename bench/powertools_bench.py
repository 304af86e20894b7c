"""The anchor: AWS Powertools for Lambda (Python) idempotency on the same workloads.

Run by `cargo xtask bench` (never by hand needed): BatchProcessor over SQS-shaped batches of BATCH,
each record handled by an `idempotent_function` (DynamoDB persistence layer: a conditional put,
then an update, per new record) whose body applies the same balance effect as the Rust modes
(one UpdateItem). Requests and write units are read from the metering proxy at METER_URL, the
same one the Rust side goes through. Prints one JSON object per workload on stdout.

Usage: powertools_bench.py ENDPOINT MESSAGES BATCH METER_URL
"""

import json
import sys
import time
import urllib.request
import uuid

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

ENDPOINT, N, BATCH, METER = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]


def meter():
    """The proxy's totals: requests, write units of writes that succeeded, of failed conditional
    writes, of cancelled transactions, read units, cancelled transactions."""
    with urllib.request.urlopen(METER) as r:
        v = json.load(r)
    return [v["requests"], v["write_units"], v["failed_write_units"], v["cancelled_write_units"],
            v["read_units"], v["cancelled_transactions"]]


def service():
    """The emulator's own service time per operation since the last call (p50 and mean, ms), from
    the proxy, which starts them again."""
    with urllib.request.urlopen(urllib.request.Request(METER + "/service", method="POST")) as r:
        return json.load(r)


def workload_ids(workload):
    """The same sequence as the Rust side's `workload_ids`."""
    if workload == "half_duplicates":
        return [i % (N // 2) for i in range(N)]
    if workload == "mixed":
        ids, fresh, r = [], 0, 0
        while len(ids) < N:
            before = fresh
            for k in range(min(BATCH, N - len(ids))):
                if k % 10 in (2, 5, 8) and before > 0:
                    ids.append((r * 7919) % before)
                    r += 1
                else:
                    ids.append(fresh)
                    fresh += 1
        return ids
    return list(range(N))


session = boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
client = session.client("dynamodb", endpoint_url=ENDPOINT)
calls = {"n": 0}
client.meta.events.register("before-send.dynamodb.*", lambda **_: calls.__setitem__("n", calls["n"] + 1))


class Context:
    function_name = "powertools-bench"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:powertools-bench"
    aws_request_id = "bench"

    @staticmethod
    def get_remaining_time_in_millis():
        return 30_000


def tables():
    suffix = uuid.uuid4().hex[:8]
    idem, balances = f"pt-idempotency-{suffix}", f"pt-balances-{suffix}"
    client.create_table(TableName=idem, BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
    client.create_table(TableName=balances, BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": "account", "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": "account", "KeyType": "HASH"}])
    return idem, balances


def event_body(i):
    return json.dumps({"specversion": "1.0", "type": "credit", "source": "/bench", "id": f"evt-{i}",
                       "tenantid": "t", "data": {"account": f"acct-{i % 1000}", "amount": 1}})


def sqs_batch(ids):
    return {"Records": [{"messageId": str(uuid.uuid4()), "receiptHandle": "x", "body": event_body(i),
                         "attributes": {}, "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                         "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:bench", "awsRegion": "us-east-1"}
                        for i in ids]}


def run(workload):
    idem, balances = tables()
    persistence = DynamoDBPersistenceLayer(table_name=idem, boto3_client=client)
    config = IdempotencyConfig(event_key_jmespath="[source, id]")
    config.register_lambda_context(Context())

    @idempotent_function(data_keyword_argument="event", config=config, persistence_store=persistence)
    def apply(event):
        client.update_item(TableName=balances, Key={"account": {"S": event["data"]["account"]}},
                           UpdateExpression="ADD #b :a", ExpressionAttributeNames={"#b": "balance"},
                           ExpressionAttributeValues={":a": {"N": str(event["data"]["amount"])}})
        return {"delta": event["data"]["amount"]}

    def record_handler(record):
        return apply(event=json.loads(record.body))

    processor = BatchProcessor(event_type=EventType.SQS)
    ids = workload_ids(workload)
    if workload == "all_duplicates":
        for start in range(0, N, BATCH):  # first pass, not timed
            process_partial_response(event=sqs_batch(ids[start:start + BATCH]), record_handler=record_handler,
                                     processor=processor, context=Context())
    calls["n"] = 0
    service()  # the untimed pass's service times dropped
    before = meter()
    latencies = []
    failures = 0
    began = time.perf_counter()
    for start in range(0, N, BATCH):
        t = time.perf_counter()
        resp = process_partial_response(event=sqs_batch(ids[start:start + BATCH]), record_handler=record_handler,
                                        processor=processor, context=Context())
        latencies.append(time.perf_counter() - t)
        failures += len(resp.get("batchItemFailures", []))
    elapsed = time.perf_counter() - began
    after = meter()
    service_ms = service()
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return {"mode": "powertools", "workload": workload, "messages": N, "seconds": elapsed,
            "batch": BATCH, "containers": 1,
            "msgs_per_s": N / elapsed, "calls_per_msg": (after[0] - before[0]) / N,
            "wcu_per_msg": (after[1] - before[1]) / N, "failed_wcu_per_msg": (after[2] - before[2]) / N,
            "cancelled_wcu_per_msg": (after[3] - before[3]) / N, "rcu_per_msg": (after[4] - before[4]) / N,
            "cancelled_per_msg": (after[5] - before[5]) / N, "p50_ms": pick(0.5),
            "p99_ms": pick(0.99), "failures": failures, "service_ms": service_ms}


for w in ["all_new", "half_duplicates", "mixed", "all_duplicates"]:
    print(json.dumps(run(w)), flush=True)
