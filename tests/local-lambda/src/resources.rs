//! Creating what a [`Plan`] declares: its tables in a local DynamoDB (through its JSON API, the
//! template's properties sent as they are), its queues in an SQS emulator (through the AWS SDK),
//! its Kinesis streams in a Kinesis emulator, its SNS topics and their SQS subscriptions in an
//! SNS emulator (which then delivers a publish to each queue, in SNS's envelope or raw, as the
//! subscription says).

use std::collections::BTreeMap;

use aws_sdk_sqs::types::QueueAttributeName;
use local_dynamodb::kinesis::Kinesis;
use local_dynamodb::sns::Sns;

use crate::plan::{Plan, Queue, Table};
use crate::{Result, sdk_error};

/// What was created from a plan: each resource's local name (its logical id) → its queue URL,
/// or its own name (a topic's is its ARN, as its `Ref` is); and its ARN (a queue's, a table's
/// stream, a Kinesis stream, a topic).
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub names: BTreeMap<String, String>,
    pub arns: BTreeMap<String, String>,
}

impl Resources {
    /// Creates the tables (in the local DynamoDB at `ddb`), queues (in the SQS emulator `sqs`)
    /// and Kinesis streams of `plan`: dead-letter queues first, each redrive policy as declared;
    /// then its topics and their SQS subscriptions (in the SNS emulator `sns`).
    pub async fn create(
        plan: &Plan,
        ddb: &str,
        sqs: &aws_sdk_sqs::Client,
        kinesis: &Kinesis,
        sns: &Sns,
    ) -> Result<Self> {
        let (mut names, mut arns) = (BTreeMap::new(), BTreeMap::new());
        for t in &plan.tables {
            if let Some(arn) = create_table(ddb, t).await? {
                arns.insert(t.name.clone(), arn);
            }
            names.insert(t.name.clone(), t.name.clone());
        }
        for q in &plan.queues {
            let url = create_queue(sqs, q, &arns).await?;
            arns.insert(q.name.clone(), queue_arn(sqs, &url).await?);
            names.insert(q.name.clone(), url);
        }
        for (name, shards) in &plan.streams {
            arns.insert(name.clone(), kinesis.create_stream(name, *shards).await?);
            names.insert(name.clone(), name.clone());
        }
        for topic in &plan.topics {
            let arn = sns.create_topic(topic).await?;
            names.insert(topic.clone(), arn.clone());
            arns.insert(topic.clone(), arn);
        }
        for s in &plan.subscriptions {
            let (Some(topic), Some(queue)) = (arns.get(&s.topic), arns.get(&s.queue)) else {
                return Err(format!("{} to {}: not created", s.queue, s.topic));
            };
            sns.subscribe_queue(topic, queue, s.raw).await?;
        }
        Ok(Self { names, arns })
    }

    /// The queue URL, or the name, of the resource `id`.
    pub fn url(&self, id: &str) -> Result<String> {
        (self.names.get(id).cloned()).ok_or_else(|| format!("the template has no {id}"))
    }

    /// The ARN of the resource `id`, which `function`'s trigger reads.
    pub fn arn(&self, function: &str, id: &str) -> Result<String> {
        (self.arns.get(id).cloned())
            .ok_or_else(|| format!("{function}: its trigger reads {id}, which has no ARN"))
    }

    /// The queue URL, or the name, of the resource a function's variable `var` names.
    pub fn named(&self, plan: &Plan, var: &str) -> Result<String> {
        let id = plan.named(var);
        self.url(id.ok_or_else(|| format!("no function of the template has {var}"))?)
    }
}

/// Creates `t` as the template declares it (its `CreateTable` request, `Table::create`) and
/// turns its TTL on; returns its stream's ARN when it has one.
async fn create_table(endpoint: &str, t: &Table) -> Result<Option<String>> {
    let created = dynamodb_call(endpoint, "CreateTable", &t.create).await?;
    if let Some(attr) = &t.ttl {
        let spec = serde_json::json!({"AttributeName": attr, "Enabled": true});
        let ttl = serde_json::json!({"TableName": t.name, "TimeToLiveSpecification": spec});
        dynamodb_call(endpoint, "UpdateTimeToLive", &ttl).await?;
    }
    let arn = created["TableDescription"]["LatestStreamArn"].as_str();
    Ok(arn.map(str::to_owned))
}

/// `action` of the DynamoDB JSON API on the local DynamoDB at `endpoint`: the template's
/// properties are its requests as they are.
async fn dynamodb_call(
    endpoint: &str,
    action: &str,
    request: &serde_json::Value,
) -> Result<serde_json::Value> {
    let target = format!("DynamoDB_20120810.{action}");
    let http = reqwest::Client::new();
    let answer = local_dynamodb::call(&http, endpoint, &target, request).await;
    answer.map_err(|e| format!("{action} {}: {e}", request["TableName"]))
}

/// The attributes `names` of the queue at `url`.
pub async fn queue_attributes(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    names: &[QueueAttributeName],
) -> Result<std::collections::HashMap<QueueAttributeName, String>> {
    let req = sqs.get_queue_attributes().queue_url(url);
    let req = req.set_attribute_names(Some(names.to_vec()));
    let out = req
        .send()
        .await
        .map_err(sdk_error(format!("queue {url}")))?;
    Ok(out.attributes.unwrap_or_default())
}

async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<String> {
    let mut attrs = queue_attributes(sqs, url, &[QueueAttributeName::QueueArn]).await?;
    (attrs.remove(&QueueAttributeName::QueueArn)).ok_or_else(|| format!("no ARN for {url}"))
}

/// Creates `q` (its dead-letter queue's ARN in `arns`); returns its URL.
async fn create_queue(
    sqs: &aws_sdk_sqs::Client,
    q: &Queue,
    arns: &BTreeMap<String, String>,
) -> Result<String> {
    let mut req = sqs
        .create_queue()
        .queue_name(if q.fifo {
            format!("{}.fifo", q.name)
        } else {
            q.name.clone()
        })
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            q.visibility_timeout.to_string(),
        )
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            q.retention.to_string(),
        );
    if q.fifo {
        req = req.attributes(QueueAttributeName::FifoQueue, "true");
    }
    if let Some((dlq, max_receive_count)) = &q.redrive {
        let arn = arns
            .get(dlq)
            .ok_or_else(|| format!("{}: its DLQ {dlq} is not a queue", q.name))?;
        let redrive = serde_json::json!({
            "deadLetterTargetArn": arn,
            "maxReceiveCount": max_receive_count,
        });
        req = req.attributes(QueueAttributeName::RedrivePolicy, redrive.to_string());
    }
    req.send()
        .await
        .map_err(sdk_error(format!("queue {}", q.name)))?
        .queue_url
        .ok_or_else(|| format!("no URL for queue {}", q.name))
}
