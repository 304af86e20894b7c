//! The template's SNS → SQS subscriptions, checked across resources (`infra::check` runs it):
//! each delivers to a queue of the template that a queue policy lets that topic, and only that
//! topic, send to; and the delivery matches what the queue's function reads. A function that
//! opens SNS's envelope declares it (`Metadata.LambdaDedupEnvelope: sns`, the code's own, which
//! its tests compare) and must be fed with the envelope kept (`RawMessageDelivery: false`);
//! one that does not must be fed raw. Either mismatch dead-letters every message
//! (`envelope_malformed`, or a body that is not the event), so it is refused here, before a
//! deploy.

use local_lambda::plan::{ref_target, strings};
use serde_json::Value;

/// The envelope a function declares it opens (`Metadata.LambdaDedupEnvelope`).
const ENVELOPE_METADATA: &str = "LambdaDedupEnvelope";

/// What is wrong with `t`'s SNS → SQS subscriptions; empty when each is sound.
pub(crate) fn check(t: &Value) -> Vec<String> {
    let resources = t["Resources"].as_object().cloned().unwrap_or_default();
    let of_type = |ty: &'static str| {
        let resources = &resources;
        resources.iter().filter(move |(_, r)| r["Type"] == ty)
    };
    let mut problems = Vec::new();
    for (id, sub) in of_type("AWS::SNS::Subscription") {
        let p = &sub["Properties"];
        if p["Protocol"] != "sqs" {
            continue;
        }
        let (Some(topic), Some(queue)) = (ref_target(&p["TopicArn"]), ref_target(&p["Endpoint"]))
        else {
            problems.push(format!(
                "{id}: its topic and queue must be resources of this template"
            ));
            continue;
        };
        let is = |rid: &str, ty: &str| resources.get(rid).is_some_and(|r| r["Type"] == ty);
        if !is(topic, "AWS::SNS::Topic") || !is(queue, "AWS::SQS::Queue") {
            problems.push(format!(
                "{id}: {topic} and {queue} must be a topic and a queue of this template"
            ));
            continue;
        }
        let allowed = of_type("AWS::SQS::QueuePolicy").any(|(_, policy)| {
            let pp = &policy["Properties"];
            let names_queue = pp["Queues"]
                .as_array()
                .is_some_and(|qs| qs.iter().any(|q| ref_target(q) == Some(queue)));
            names_queue && statements(&pp["PolicyDocument"]).any(|s| lets_topic_send(s, topic))
        });
        if !allowed {
            problems.push(format!(
                "{id}: no AWS::SQS::QueuePolicy on {queue} lets sns.amazonaws.com sqs:SendMessage \
                 on the condition aws:SourceArn = {topic} (the topic could not deliver, or any \
                 topic could)"
            ));
        }
        let raw = p["RawMessageDelivery"] == true || p["RawMessageDelivery"] == "true";
        for (fid, f) in of_type("AWS::Serverless::Function") {
            let fed = f["Properties"]["Events"].as_object().is_some_and(|evs| {
                evs.values().any(|e| {
                    e["Type"] == "SQS" && ref_target(&e["Properties"]["Queue"]) == Some(queue)
                })
            });
            if !fed {
                continue;
            }
            let opens_sns = f["Metadata"][ENVELOPE_METADATA] == "sns";
            if raw && opens_sns {
                problems.push(format!(
                    "{id}: raw message delivery to {queue}, whose function {fid} opens SNS's \
                     envelope: every message would be dead-lettered (envelope_malformed); set \
                     RawMessageDelivery: false"
                ));
            } else if !raw && !opens_sns {
                problems.push(format!(
                    "{id}: SNS's envelope delivered to {queue}, whose function {fid} reads the \
                     body as the event: set RawMessageDelivery: true, or open the envelope \
                     (Envelope::Sns) and declare it ({ENVELOPE_METADATA}: sns)"
                ));
            }
        }
    }
    problems
}

/// The statements of a policy document (one or a list).
fn statements(doc: &Value) -> impl Iterator<Item = &Value> {
    let s = &doc["Statement"];
    let list: Vec<&Value> = match s {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    };
    list.into_iter()
}

/// Whether statement `s` allows SNS to send to the queue only for `topic`.
fn lets_topic_send(s: &Value, topic: &str) -> bool {
    let source = ["ArnEquals", "ArnLike", "StringEquals"]
        .iter()
        .any(|op| ref_target(&s["Condition"][op]["aws:SourceArn"]) == Some(topic));
    s["Effect"] == "Allow"
        && strings(&s["Principal"]["Service"])
            .iter()
            .any(|p| p == "sns.amazonaws.com")
        && strings(&s["Action"]).iter().any(|a| a == "sqs:SendMessage")
        && source
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        crate::infra::load(&crate::root().join("infra/template.yaml")).expect("template")
    }

    fn sub(t: &mut Value) -> &mut Value {
        &mut t["Resources"]["LedgerFanoutSubscription"]["Properties"]
    }

    fn policy(t: &mut Value) -> &mut Value {
        &mut t["Resources"]["LedgerFanoutQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
            [0]
    }

    fn broken(edit: impl FnOnce(&mut Value), expect: &str) {
        let mut t = template();
        edit(&mut t);
        let problems = check(&t);
        assert!(
            problems.iter().any(|p| p.contains(expect)),
            "expected a problem mentioning {expect:?}, got {problems:#?}"
        );
    }

    /// The committed fanout is sound; each way of breaking it in a copy is refused: raw
    /// delivery to the function that opens the envelope, the envelope to a function that does
    /// not declare it, no queue policy, a policy for another topic or without its condition.
    #[test]
    fn the_sns_fanout_subscription_queue_policy_and_envelope_agree() {
        assert_eq!(check(&template()), Vec::<String>::new());
        broken(
            |t| sub(t)["RawMessageDelivery"] = true.into(),
            "envelope_malformed",
        );
        broken(
            |t| {
                let m = t["Resources"]["LedgerFanout"]["Metadata"]
                    .as_object_mut()
                    .expect("metadata");
                m.remove(ENVELOPE_METADATA);
            },
            "reads the body as the event",
        );
        broken(
            |t| {
                let r = t["Resources"].as_object_mut().expect("resources");
                r.remove("LedgerFanoutQueuePolicy");
            },
            "no AWS::SQS::QueuePolicy",
        );
        broken(
            |t| {
                policy(t)["Condition"]["ArnEquals"]["aws:SourceArn"] =
                    serde_json::json!({"Ref": "AlarmTopic"})
            },
            "no AWS::SQS::QueuePolicy",
        );
        broken(
            |t| {
                let s = policy(t).as_object_mut().expect("statement");
                s.remove("Condition");
            },
            "any topic could",
        );
        broken(
            |t| sub(t)["Endpoint"] = serde_json::json!({"Fn::GetAtt": ["MarkTable", "Arn"]}),
            "must be a topic and a queue",
        );
    }
}
