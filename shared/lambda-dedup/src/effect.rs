//! Effects: the DynamoDB writes a handler wants committed together with the mark (S5), described
//! in the library's own terms so that handlers never depend on the SDK. The adapter translates each
//! [`Effect`] into one `TransactWriteItem`.
//!
//! ```
//! use lambda_dedup::{Effect, Item, Value};
//! let credit = Effect::update("balances", Item::new().with("account", "credito-17"))
//!     .expression("ADD #balance :amount")
//!     .name("#balance", "balance")
//!     .value(":amount", 10);
//! assert_eq!(credit.table(), "balances");
//! ```

use std::collections::BTreeMap;

/// A DynamoDB attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// String.
    S(String),
    /// Number, in DynamoDB's decimal string form.
    N(String),
    /// Binary.
    B(Vec<u8>),
    /// Boolean.
    Bool(bool),
    /// Null.
    Null,
    /// List.
    L(Vec<Value>),
    /// Map.
    M(BTreeMap<String, Value>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::S(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::S(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
macro_rules! number_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Self {
                Value::N(n.to_string())
            }
        }
    )*};
}
number_from!(i32, i64, u32, u64, usize);

/// An item or key: attribute name → value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Item(pub BTreeMap<String, Value>);

impl Item {
    /// An empty item.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an attribute.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.0.insert(name.to_owned(), value.into());
        self
    }
}

/// A one-attribute key: `("account", "acme/a-1").into()`.
impl<V: Into<Value>> From<(&str, V)> for Item {
    fn from((name, value): (&str, V)) -> Self {
        Item::new().with(name, value)
    }
}

/// What an effect does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectKind {
    /// `Put`: write `item` whole.
    Put,
    /// `Update`: apply the update expression to the item at `key`.
    Update,
    /// `Delete`: delete the item at `key`.
    Delete,
    /// `ConditionCheck`: write nothing; the transaction fails unless the condition holds.
    ConditionCheck,
}

/// One write to commit with the mark.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    table: String,
    kind: EffectKind,
    /// The item for `Put`, the key otherwise.
    item: Item,
    expression: Option<String>,
    condition: Option<String>,
    names: BTreeMap<String, String>,
    values: BTreeMap<String, Value>,
}

impl Effect {
    fn new(table: &str, kind: EffectKind, item: Item) -> Self {
        Self {
            table: table.to_owned(),
            kind,
            item,
            expression: None,
            condition: None,
            names: BTreeMap::new(),
            values: BTreeMap::new(),
        }
    }

    /// Writes `item` to `table`.
    pub fn put(table: &str, item: Item) -> Self {
        Self::new(table, EffectKind::Put, item)
    }

    /// Updates the item at `key` with the [`expression`](Self::expression) you set.
    pub fn update(table: &str, key: Item) -> Self {
        Self::new(table, EffectKind::Update, key)
    }

    /// Adds `amount` to the number `attribute` of the item at `key` (created at 0 if absent):
    /// `ADD` in an update expression, so a balance, a counter or a stock level.
    pub fn add(table: &str, key: impl Into<Item>, attribute: &str, amount: i64) -> Self {
        Self::update(table, key.into())
            .expression("ADD #attribute :amount")
            .name("#attribute", attribute)
            .value(":amount", amount)
    }

    /// Deletes the item at `key`.
    pub fn delete(table: &str, key: Item) -> Self {
        Self::new(table, EffectKind::Delete, key)
    }

    /// Requires `condition` to hold on the item at `key`, writing nothing.
    pub fn condition_check(table: &str, key: Item, condition: &str) -> Self {
        Self::new(table, EffectKind::ConditionCheck, key).condition(condition)
    }

    /// The update expression (for [`Effect::update`]).
    pub fn expression(mut self, update: &str) -> Self {
        self.expression = Some(update.to_owned());
        self
    }

    /// A condition expression: if it fails, nothing of the commit is written, not even the mark.
    pub fn condition(mut self, condition: &str) -> Self {
        self.condition = Some(condition.to_owned());
        self
    }

    /// An expression attribute name (`#name` → attribute).
    pub fn name(mut self, placeholder: &str, attribute: &str) -> Self {
        self.names
            .insert(placeholder.to_owned(), attribute.to_owned());
        self
    }

    /// An expression attribute value (`:value` → value).
    pub fn value(mut self, placeholder: &str, value: impl Into<Value>) -> Self {
        self.values.insert(placeholder.to_owned(), value.into());
        self
    }

    /// The table written.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The kind of write.
    pub fn kind(&self) -> EffectKind {
        self.kind
    }

    /// The item (`Put`) or key (the others).
    pub fn item(&self) -> &Item {
        &self.item
    }

    /// What identifies the item it writes, to keep two writes of one item apart (in one
    /// transaction, or in one wave of transactions in flight together): its table and its key,
    /// a `Put` by its whole item (its key schema is unknown here).
    pub fn target(&self) -> String {
        let kind = if self.kind == EffectKind::Put {
            "put"
        } else {
            "key"
        };
        format!("{}\u{0}{kind}\u{0}{:?}", self.table, self.item)
    }

    /// The update expression.
    pub fn update_expression(&self) -> Option<&str> {
        self.expression.as_deref()
    }

    /// The condition expression.
    pub fn condition_expression(&self) -> Option<&str> {
        self.condition.as_deref()
    }

    /// Expression attribute names.
    pub fn names(&self) -> &BTreeMap<String, String> {
        &self.names
    }

    /// Expression attribute values.
    pub fn values(&self) -> &BTreeMap<String, Value> {
        &self.values
    }
}
