//! A few Kinesis calls against the Kinesis emulator (moto, beside the SQS one), over its JSON
//! protocol: enough for the local stack to create the ledger's stream, for tests and the demo to
//! put records, and for xtask's stand-in trigger to read shards. Plain HTTP rather than the SDK
//! crate: five calls do not justify compiling another service client.

use serde_json::{Value, json};

use crate::moto::Emulator;

/// A Kinesis endpoint (the emulator's).
#[derive(Debug, Clone)]
pub struct Kinesis(Emulator);

/// One record as `GetRecords` returns it.
#[derive(Debug, Clone)]
pub struct KinesisRecord {
    /// Its sequence number.
    pub sequence_number: String,
    /// Its partition key.
    pub partition_key: String,
    /// Base64, as the API and Lambda's event carry it.
    pub data: String,
    /// When it arrived, epoch seconds.
    pub arrival: f64,
}

impl Kinesis {
    /// A client of the emulator at `endpoint`.
    pub fn new(endpoint: &str) -> Self {
        Self(Emulator::new(endpoint, "kinesis"))
    }

    async fn call(&self, action: &str, body: Value) -> Result<Value, String> {
        let target = Some(format!("Kinesis_20131202.{action}"));
        let json = "application/x-amz-json-1.1";
        let text = self.0.post(action, json, target, body.to_string()).await?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| self.0.failed(action, e))
    }

    /// Creates `name` with `shards` shards and waits until it is active; returns its ARN.
    pub async fn create_stream(&self, name: &str, shards: u32) -> Result<String, String> {
        self.call(
            "CreateStream",
            json!({"StreamName": name, "ShardCount": shards}),
        )
        .await?;
        for _ in 0..100 {
            let d = self
                .call("DescribeStream", json!({"StreamName": name}))
                .await?;
            let desc = &d["StreamDescription"];
            if desc["StreamStatus"] == "ACTIVE" {
                return desc["StreamARN"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "kinesis: no stream ARN".into());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Err(format!("kinesis: stream {name} did not become active"))
    }

    /// The stream's shard ids.
    pub async fn shards(&self, name: &str) -> Result<Vec<String>, String> {
        let d = self
            .call("DescribeStream", json!({"StreamName": name}))
            .await?;
        Ok(d["StreamDescription"]["Shards"]
            .as_array()
            .map(|s| {
                s.iter()
                    .filter_map(|s| s["ShardId"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Puts one record; returns its shard and sequence number.
    pub async fn put(
        &self,
        name: &str,
        partition_key: &str,
        data: &[u8],
    ) -> Result<(String, String), String> {
        use base64::Engine as _;
        let out = self
            .call(
                "PutRecord",
                json!({"StreamName": name, "PartitionKey": partition_key,
                       "Data": base64::engine::general_purpose::STANDARD.encode(data)}),
            )
            .await?;
        Ok((
            out["ShardId"].as_str().unwrap_or_default().to_owned(),
            out["SequenceNumber"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ))
    }

    /// An iterator of `shard`: from the start, or after a sequence number
    /// (`AFTER_SEQUENCE_NUMBER`).
    pub async fn iterator(
        &self,
        name: &str,
        shard: &str,
        after: Option<&str>,
    ) -> Result<String, String> {
        let mut req = json!({"StreamName": name, "ShardId": shard,
                             "ShardIteratorType": "TRIM_HORIZON"});
        if let Some(seq) = after {
            req["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER".into();
            req["StartingSequenceNumber"] = seq.into();
        }
        self.call("GetShardIterator", req).await?["ShardIterator"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "kinesis: no shard iterator".into())
    }

    /// Up to `limit` records from `iterator`, and the next iterator (none once the shard closed).
    pub async fn records(
        &self,
        iterator: &str,
        limit: u32,
    ) -> Result<(Vec<KinesisRecord>, Option<String>), String> {
        let out = self
            .call(
                "GetRecords",
                json!({"ShardIterator": iterator, "Limit": limit}),
            )
            .await?;
        let records = out["Records"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| KinesisRecord {
                        sequence_number: r["SequenceNumber"].as_str().unwrap_or_default().into(),
                        partition_key: r["PartitionKey"].as_str().unwrap_or_default().into(),
                        data: r["Data"].as_str().unwrap_or_default().into(),
                        arrival: r["ApproximateArrivalTimestamp"].as_f64().unwrap_or(0.0),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok((
            records,
            out["NextShardIterator"].as_str().map(str::to_owned),
        ))
    }
}
