//! The PostgreSQL store's effects: your own SQL statements, with their values bound as
//! parameters (`$1`, `$2`, …), committed in the mark's transaction.
//!
//! ```
//! use lambda_dedup_postgres::SqlEffect;
//! let credit = SqlEffect::new(
//!     "UPDATE balances SET balance = balance + $2 WHERE account = $1",
//! )
//! .bind("acme/credito-17")
//! .bind(10_i64)
//! .required();
//! assert_eq!(credit.params().len(), 2);
//! ```
//!
//! Values are never written into the statement's text: the text is yours, a constant of your
//! code; what a message carries goes in [`SqlEffect::bind`].

use tokio_postgres::types::ToSql;

/// A value bound to a statement's parameter. Its PostgreSQL type is the parameter's: cast the
/// placeholder (`$2::bigint`) where the statement does not fix it.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// `text` (and `varchar`).
    Text(String),
    /// `bigint` (`int8`).
    BigInt(i64),
    /// `integer` (`int4`).
    Int(i32),
    /// `double precision` (`float8`).
    Double(f64),
    /// `boolean`.
    Bool(bool),
    /// `bytea`.
    Bytes(Vec<u8>),
    /// A `NULL` of type `text` (cast it: `$3::text::bigint` for a null of another type).
    NullText,
}

impl SqlValue {
    pub(crate) fn as_sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            SqlValue::Text(v) => v,
            SqlValue::BigInt(v) => v,
            SqlValue::Int(v) => v,
            SqlValue::Double(v) => v,
            SqlValue::Bool(v) => v,
            SqlValue::Bytes(v) => v,
            SqlValue::NullText => &NULL_TEXT,
        }
    }
}

static NULL_TEXT: Option<String> = None;

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}
/// `From<T> for SqlValue` for each Rust type that one variant holds as it is.
macro_rules! sql_value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for SqlValue {
            fn from(v: $t) -> Self {
                SqlValue::$variant(v)
            }
        }
    )*};
}
sql_value_from!(String => Text, i64 => BigInt, i32 => Int, f64 => Double, bool => Bool);
impl From<Vec<u8>> for SqlValue {
    fn from(v: Vec<u8>) -> Self {
        SqlValue::Bytes(v)
    }
}

/// One SQL statement to run in the mark's transaction (S5): committed with the mark, or not at
/// all.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlEffect {
    sql: String,
    params: Vec<SqlValue>,
    required: bool,
}

impl SqlEffect {
    /// The statement `sql`, with placeholders `$1`, `$2`, … for the values you
    /// [`bind`](Self::bind).
    pub fn new(sql: impl Into<String>) -> Self {
        Self {
            sql: sql.into(),
            params: Vec::new(),
            required: false,
        }
    }

    /// Binds the next parameter.
    pub fn bind(mut self, value: impl Into<SqlValue>) -> Self {
        self.params.push(value.into());
        self
    }

    /// The effect's condition: the statement must touch (or, for a `SELECT`, return) at least
    /// one row. When it touches none, nothing of the commit is written, not even the mark, and
    /// the commit is [`lambda_dedup::Commit::EffectRejected`] at this effect's index: write the
    /// condition into the statement's `WHERE` (`UPDATE … WHERE status = 'PENDING'`,
    /// `INSERT … ON CONFLICT DO NOTHING`, `SELECT 1 FROM … WHERE …`).
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The statement's text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The bound values, in order.
    pub fn params(&self) -> &[SqlValue] {
        &self.params
    }

    /// Whether the statement must touch a row.
    pub fn is_required(&self) -> bool {
        self.required
    }

    pub(crate) fn bound(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params.iter().map(SqlValue::as_sql).collect()
    }
}
