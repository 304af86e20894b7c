//! Reading items back through the AWS SDK, as a test checks what a function wrote: one strongly
//! consistent `GetItem` by a string key, every item of a table, and the text of a string or
//! number attribute.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::scan::ScanError;
use aws_sdk_dynamodb::types::AttributeValue;

/// An item as the SDK returns it.
pub type Item = HashMap<String, AttributeValue>;

/// The item of `table` whose string key `key_attr` is `key`, read strongly consistently, or
/// `None` when there is none.
pub async fn get(
    client: &Client,
    table: &str,
    key_attr: &str,
    key: &str,
) -> Result<Option<Item>, SdkError<GetItemError>> {
    let out = client
        .get_item()
        .table_name(table)
        .key(key_attr, AttributeValue::S(key.into()))
        .consistent_read(true)
        .send()
        .await?;
    Ok(out.item)
}

/// Every item of `table`, read strongly consistently, page after page.
pub async fn scan(client: &Client, table: &str) -> Result<Vec<Item>, SdkError<ScanError>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        items.extend(out.items.unwrap_or_default());
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(items);
        }
    }
}

/// The string attribute `attr` of `item`, or `None` when it is absent or not a string.
pub fn string<'a>(item: &'a Item, attr: &str) -> Option<&'a str> {
    item.get(attr)?.as_s().ok().map(String::as_str)
}

/// The number attribute `attr` of `item` as DynamoDB's decimal text, or `None` when it is
/// absent or not a number.
pub fn number<'a>(item: &'a Item, attr: &str) -> Option<&'a str> {
    item.get(attr)?.as_n().ok().map(String::as_str)
}
