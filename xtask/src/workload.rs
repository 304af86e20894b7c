//! What the demo and the chaos runs send (CloudEvents of the ledger and of payments) and how
//! their checks are tallied.

use serde_json::{Value, json};

use crate::Result;

pub(crate) fn ce(kind: &str, source: &str, id: &str, tenant: &str, data: Value) -> String {
    // Events happen now: one older than the retention would go to reconciliation (S10).
    let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    json!({"specversion": "1.0", "type": kind, "source": source, "id": id,
           "tenantid": tenant, "time": time, "data": data})
    .to_string()
}

pub(crate) fn credit(id: &str, account: &str, amount: i64) -> String {
    let (kind, amount) = if amount < 0 {
        ("debit", -amount)
    } else {
        ("credit", amount)
    };
    ce(
        kind,
        "/core-banking",
        id,
        "bank-a",
        json!({"account": account, "amount": amount}),
    )
}

pub(crate) fn payment(id: &str, cents: i64) -> String {
    ce(
        "payment.requested",
        "/checkout",
        id,
        "shop-1",
        json!({"amount_cents": cents, "currency": "EUR", "customer_ref": format!("cust-{id}")}),
    )
}

/// Checks as they are made: what each says, and whether it held.
#[derive(Default)]
pub(crate) struct Checks(pub(crate) Vec<(String, bool)>);

impl Checks {
    pub(crate) fn check(&mut self, what: impl Into<String>, ok: bool) {
        let what = what.into();
        println!("  [{}] {what}", if ok { " ok " } else { "FAIL" });
        self.0.push((what, ok));
    }

    /// `Ok` when every check held; otherwise the failures, counted.
    pub(crate) fn verdict(&self, what: &str) -> Result<()> {
        let failed = self.0.iter().filter(|(_, ok)| !ok).count();
        println!("xtask: {what}: {} checks, {failed} failed", self.0.len());
        if failed == 0 {
            Ok(())
        } else {
            Err(format!("{failed} of {} {what} checks failed", self.0.len()))
        }
    }
}
