//! The order's rule: what a valid order is, the item it is stored as, and the answer it gets.

use lambda_dedup::{Effect, Item, OwnerToken};
use lambda_dedup_runtime::http::Reply;
use lambda_dedup_runtime::{HandlerError, HttpEvent};

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

/// A new order: a fresh id, put into `table` only if no order has it, answered 201 with the
/// order and its `location`. Of concurrent attempts under one key only the one whose commit
/// wins is written, so the id the answer names is the stored order's.
pub fn create(table: &str, e: HttpEvent<NewOrder>) -> Result<Reply, HandlerError> {
    let order = e.payload;
    if order.quantity == 0 || order.quantity > MAX_QUANTITY {
        return Err(HandlerError::invalid("quantity must be between 1 and 1000"));
    }
    if order.sku.is_empty() || order.sku.len() > 64 {
        return Err(HandlerError::invalid("sku must be 1 to 64 characters"));
    }
    let id = format!("ord_{}", OwnerToken::random().as_str());
    let item = Item::new()
        .with("order_id", id.as_str())
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
        .effect(Effect::put(table, item).condition("attribute_not_exists(order_id)")))
}
