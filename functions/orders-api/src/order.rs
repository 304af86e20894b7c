//! The order's rule: what a valid order is, the item it is stored as, and the answer it gets.

use lambda_dedup::{Effect, Item};
use lambda_dedup_runtime::http::Reply;
use lambda_dedup_runtime::{HandlerError, HttpEvent};

/// The attribute of an order's key: the id derived from its request's key.
pub const ORDER_ID: &str = "order_id";

/// The most of one item in an order.
pub const MAX_QUANTITY: u32 = 1_000;

/// An order as POSTed: an item and how many.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct NewOrder {
    /// The item's SKU.
    pub sku: String,
    /// How many: 1 to [`MAX_QUANTITY`].
    pub quantity: u32,
}

/// A new order: its id derived from the request's whole key (scope, caller, `Idempotency-Key`:
/// [`DedupKey::idempotency_key`](lambda_dedup::DedupKey::idempotency_key)), put into `table`,
/// answered 201 with the order and its `location`. The door writes the order as the key's own
/// mark, only if no order has that id: every retry names the same order.
pub fn create(table: &str, e: HttpEvent<NewOrder>) -> Result<Reply, HandlerError> {
    let order = e.payload;
    if order.quantity == 0 || order.quantity > MAX_QUANTITY {
        return Err(HandlerError::invalid("quantity must be between 1 and 1000"));
    }
    if order.sku.is_empty() || order.sku.len() > 64 {
        return Err(HandlerError::invalid("sku must be 1 to 64 characters"));
    }
    let id = e.key.idempotency_key();
    let item = Item::new()
        .with(ORDER_ID, id.as_str())
        .with("sku", order.sku.as_str())
        .with("quantity", u64::from(order.quantity))
        .with("status", "created");
    let body = serde_json::json!({
        "id": id,
        "sku": order.sku,
        "quantity": order.quantity,
        "status": "created",
    });
    Ok(Reply::created(body)
        .header("location", format!("/orders/{id}"))
        .effect(Effect::put(table, item)))
}
