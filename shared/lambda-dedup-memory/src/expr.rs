//! The subset of DynamoDB's expression language the memory store evaluates: condition
//! expressions (comparisons, `BETWEEN`, `IN`, `AND`/`OR`/`NOT`, parentheses, `attribute_exists`,
//! `attribute_not_exists`, `begins_with`, `contains`, `size`) and update expressions (`SET` with
//! `+`, `-` and `if_not_exists`, `REMOVE`, `ADD` on numbers). Attribute paths are top-level names
//! (`#name` or a bare name); nested paths are refused as unsupported, never guessed at.

use std::collections::{BTreeMap, BTreeSet};

use lambda_dedup::Value;

/// Why an expression could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExprError {
    /// Malformed, or names a placeholder that is not given (DynamoDB: `ValidationException`).
    Syntax(String),
    /// Valid DynamoDB, but outside what the memory store evaluates.
    Unsupported(String),
    /// Well formed, but cannot apply to this item (an `ADD` to a string, arithmetic on a missing
    /// attribute): DynamoDB's `ValidationError` at the write's position.
    Type(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Name(String),
    Val(String),
    Sym(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, ExprError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let word = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_') {
            *i += 1;
        }
        s[start..*i].to_owned()
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' | b':' => {
                i += 1;
                let w = word(&mut i);
                if w.is_empty() {
                    return Err(ExprError::Syntax(format!("empty placeholder at {i}")));
                }
                out.push(if c == b'#' {
                    Tok::Name(format!("#{w}"))
                } else {
                    Tok::Val(format!(":{w}"))
                });
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => out.push(Tok::Ident(word(&mut i))),
            _ => {
                let two = s.get(i..i + 2).unwrap_or("");
                let sym = match two {
                    "<>" => "<>",
                    "<=" => "<=",
                    ">=" => ">=",
                    _ => match c {
                        b'(' => "(",
                        b')' => ")",
                        b',' => ",",
                        b'=' => "=",
                        b'<' => "<",
                        b'>' => ">",
                        b'+' => "+",
                        b'-' => "-",
                        b'.' => ".",
                        b'[' => "[",
                        b']' => "]",
                        _ => {
                            return Err(ExprError::Syntax(format!("unexpected character at {i}")));
                        }
                    },
                };
                i += sym.len();
                out.push(Tok::Sym(sym));
            }
        }
    }
    Ok(out)
}

/// An attribute name, resolved from `#placeholders`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    Path(String),
    Value(Value),
    Size(String),
    IfNotExists(String, Box<Operand>),
    Plus(Box<Operand>, Box<Operand>),
    Minus(Box<Operand>, Box<Operand>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cond {
    Cmp(Operand, &'static str, Operand),
    Between(Operand, Operand, Operand),
    In(Operand, Vec<Operand>),
    Exists(String),
    NotExists(String),
    BeginsWith(Operand, Operand),
    Contains(Operand, Operand),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}

#[derive(Debug, Clone, PartialEq)]
enum Action {
    Set(String, Operand),
    Remove(String),
    Add(String, Operand),
}

/// A parsed update expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Update(Vec<Action>);

/// The placeholders an effect gives, and which of them its expressions used.
pub(crate) struct Placeholders<'a> {
    names: &'a BTreeMap<String, String>,
    values: &'a BTreeMap<String, Value>,
    used_names: BTreeSet<String>,
    used_values: BTreeSet<String>,
}

impl<'a> Placeholders<'a> {
    pub(crate) fn new(
        names: &'a BTreeMap<String, String>,
        values: &'a BTreeMap<String, Value>,
    ) -> Self {
        Self {
            names,
            values,
            used_names: BTreeSet::new(),
            used_values: BTreeSet::new(),
        }
    }

    /// DynamoDB refuses a request that gives a placeholder its expressions do not use.
    pub(crate) fn check_all_used(&self) -> Result<(), ExprError> {
        if let Some(n) = self.names.keys().find(|n| !self.used_names.contains(*n)) {
            return Err(ExprError::Syntax(format!(
                "unused expression attribute name {n}"
            )));
        }
        if let Some(v) = self.values.keys().find(|v| !self.used_values.contains(*v)) {
            return Err(ExprError::Syntax(format!(
                "unused expression attribute value {v}"
            )));
        }
        Ok(())
    }
}

struct Parser<'p, 'a> {
    toks: Vec<Tok>,
    pos: usize,
    ph: &'p mut Placeholders<'a>,
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(w)) if w.eq_ignore_ascii_case(kw))
    }

    fn sym(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(x)) if *x == s)
    }

    fn expect(&mut self, s: &str) -> Result<(), ExprError> {
        if self.sym(s) {
            self.pos += 1;
            Ok(())
        } else {
            Err(ExprError::Syntax(format!("expected {s:?}")))
        }
    }

    fn done(&self) -> Result<(), ExprError> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(ExprError::Syntax(format!("unexpected {t:?}"))),
        }
    }

    fn path(&mut self) -> Result<String, ExprError> {
        let name = match self.next() {
            Some(Tok::Name(n)) => {
                self.ph.used_names.insert(n.clone());
                self.ph
                    .names
                    .get(&n)
                    .cloned()
                    .ok_or_else(|| ExprError::Syntax(format!("undefined name {n}")))?
            }
            Some(Tok::Ident(w)) if !is_reserved(&w) => w,
            t => {
                return Err(ExprError::Syntax(format!(
                    "expected an attribute, got {t:?}"
                )));
            }
        };
        if self.sym(".") || self.sym("[") {
            return Err(ExprError::Unsupported(
                "nested attribute paths are not evaluated by the memory store".into(),
            ));
        }
        Ok(name)
    }

    fn operand(&mut self) -> Result<Operand, ExprError> {
        let first = self.term()?;
        if self.sym("+") || self.sym("-") {
            let plus = self.sym("+");
            self.pos += 1;
            let second = self.term()?;
            return Ok(if plus {
                Operand::Plus(Box::new(first), Box::new(second))
            } else {
                Operand::Minus(Box::new(first), Box::new(second))
            });
        }
        Ok(first)
    }

    fn term(&mut self) -> Result<Operand, ExprError> {
        match self.peek().cloned() {
            Some(Tok::Val(v)) => {
                self.pos += 1;
                self.ph.used_values.insert(v.clone());
                let value = self
                    .ph
                    .values
                    .get(&v)
                    .cloned()
                    .ok_or_else(|| ExprError::Syntax(format!("undefined value {v}")))?;
                Ok(Operand::Value(value))
            }
            Some(Tok::Ident(f)) if f == "size" || f == "if_not_exists" => {
                self.pos += 1;
                self.expect("(")?;
                let path = self.path()?;
                let op = if f == "size" {
                    Operand::Size(path)
                } else {
                    self.expect(",")?;
                    Operand::IfNotExists(path, Box::new(self.operand()?))
                };
                self.expect(")")?;
                Ok(op)
            }
            Some(Tok::Ident(f)) if f == "list_append" => Err(ExprError::Unsupported(
                "list_append is not evaluated by the memory store".into(),
            )),
            _ => Ok(Operand::Path(self.path()?)),
        }
    }

    fn condition(&mut self) -> Result<Cond, ExprError> {
        self.joined("OR", Self::and, Cond::Or)
    }

    fn and(&mut self) -> Result<Cond, ExprError> {
        self.joined("AND", Self::not, Cond::And)
    }

    /// `operand (keyword operand)*`, joined left to right by `join` (`a OR b OR c` is
    /// `(a OR b) OR c`).
    fn joined(
        &mut self,
        keyword: &str,
        operand: fn(&mut Self) -> Result<Cond, ExprError>,
        join: fn(Box<Cond>, Box<Cond>) -> Cond,
    ) -> Result<Cond, ExprError> {
        let mut left = operand(self)?;
        while self.keyword(keyword) {
            self.pos += 1;
            left = join(Box::new(left), Box::new(operand(self)?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Cond, ExprError> {
        if self.keyword("NOT") {
            self.pos += 1;
            return Ok(Cond::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Cond, ExprError> {
        if self.sym("(") {
            self.pos += 1;
            let c = self.condition()?;
            self.expect(")")?;
            return Ok(c);
        }
        if let Some(Tok::Ident(f)) = self.peek().cloned() {
            let func = match f.as_str() {
                "attribute_exists" | "attribute_not_exists" | "begins_with" | "contains" => Some(f),
                "attribute_type" => {
                    return Err(ExprError::Unsupported(
                        "attribute_type is not evaluated by the memory store".into(),
                    ));
                }
                _ => None,
            };
            if let Some(f) = func {
                self.pos += 1;
                self.expect("(")?;
                let c = match f.as_str() {
                    "attribute_exists" => Cond::Exists(self.path()?),
                    "attribute_not_exists" => Cond::NotExists(self.path()?),
                    _ => {
                        let a = self.operand()?;
                        self.expect(",")?;
                        let b = self.operand()?;
                        if f == "begins_with" {
                            Cond::BeginsWith(a, b)
                        } else {
                            Cond::Contains(a, b)
                        }
                    }
                };
                self.expect(")")?;
                return Ok(c);
            }
        }
        let left = self.operand()?;
        if self.keyword("BETWEEN") {
            self.pos += 1;
            let low = self.operand()?;
            if !self.keyword("AND") {
                return Err(ExprError::Syntax("BETWEEN without AND".into()));
            }
            self.pos += 1;
            let high = self.operand()?;
            return Ok(Cond::Between(left, low, high));
        }
        if self.keyword("IN") {
            self.pos += 1;
            self.expect("(")?;
            let mut list = vec![self.operand()?];
            while self.sym(",") {
                self.pos += 1;
                list.push(self.operand()?);
            }
            self.expect(")")?;
            return Ok(Cond::In(left, list));
        }
        let op = match self.next() {
            Some(Tok::Sym(s @ ("=" | "<>" | "<" | "<=" | ">" | ">="))) => s,
            t => {
                return Err(ExprError::Syntax(format!(
                    "expected a comparison, got {t:?}"
                )));
            }
        };
        Ok(Cond::Cmp(left, op, self.operand()?))
    }

    fn update(&mut self) -> Result<Update, ExprError> {
        let mut actions = Vec::new();
        let mut clauses = BTreeSet::new();
        while let Some(tok) = self.next() {
            let clause = match tok {
                Tok::Ident(w) => w.to_ascii_uppercase(),
                t => return Err(ExprError::Syntax(format!("expected a clause, got {t:?}"))),
            };
            if !clauses.insert(clause.clone()) {
                return Err(ExprError::Syntax(format!("{clause} given twice")));
            }
            loop {
                match clause.as_str() {
                    "SET" => {
                        let path = self.path()?;
                        self.expect("=")?;
                        actions.push(Action::Set(path, self.operand()?));
                    }
                    "REMOVE" => actions.push(Action::Remove(self.path()?)),
                    "ADD" => {
                        let path = self.path()?;
                        actions.push(Action::Add(path, self.term()?));
                    }
                    "DELETE" => {
                        return Err(ExprError::Unsupported(
                            "DELETE (from a set) is not evaluated by the memory store".into(),
                        ));
                    }
                    _ => return Err(ExprError::Syntax(format!("unknown clause {clause}"))),
                }
                if self.sym(",") {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        if actions.is_empty() {
            return Err(ExprError::Syntax("empty update expression".into()));
        }
        Ok(Update(actions))
    }
}

fn is_reserved(w: &str) -> bool {
    [
        "AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE",
    ]
    .iter()
    .any(|k| k.eq_ignore_ascii_case(w))
}

/// Parses a condition expression.
pub(crate) fn condition(s: &str, ph: &mut Placeholders<'_>) -> Result<Cond, ExprError> {
    let mut p = Parser {
        toks: lex(s)?,
        pos: 0,
        ph,
    };
    let c = p.condition()?;
    p.done()?;
    Ok(c)
}

/// Parses an update expression.
pub(crate) fn update(s: &str, ph: &mut Placeholders<'_>) -> Result<Update, ExprError> {
    let mut p = Parser {
        toks: lex(s)?,
        pos: 0,
        ph,
    };
    p.update()
}

/// A number as DynamoDB keeps it: an integer exactly, anything else as a float.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num(s: &str) -> Result<Num, ExprError> {
    if let Ok(i) = s.parse::<i128>() {
        return Ok(Num::Int(i));
    }
    s.parse::<f64>()
        .map(Num::Float)
        .map_err(|_| ExprError::Type(format!("{s:?} is not a number")))
}

fn as_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

fn arith(a: &str, b: &str, minus: bool) -> Result<String, ExprError> {
    Ok(match (num(a)?, num(b)?) {
        (Num::Int(x), Num::Int(y)) => {
            let r = if minus {
                x.checked_sub(y)
            } else {
                x.checked_add(y)
            };
            r.ok_or_else(|| ExprError::Type("number out of range".into()))?
                .to_string()
        }
        (x, y) => {
            let r = if minus {
                as_f64(x) - as_f64(y)
            } else {
                as_f64(x) + as_f64(y)
            };
            r.to_string()
        }
    })
}

fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::N(x), Value::N(y)) => match (num(x).ok()?, num(y).ok()?) {
            (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
            (x, y) => as_f64(x).partial_cmp(&as_f64(y)),
        },
        (Value::S(x), Value::S(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::B(x), Value::B(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

type Attrs = BTreeMap<String, Value>;

fn resolve(op: &Operand, item: &Attrs) -> Result<Option<Value>, ExprError> {
    Ok(match op {
        Operand::Path(p) => item.get(p).cloned(),
        Operand::Value(v) => Some(v.clone()),
        Operand::Size(p) => item.get(p).and_then(|v| {
            let n = match v {
                Value::S(s) => s.len(),
                Value::B(b) => b.len(),
                Value::L(l) => l.len(),
                Value::M(m) => m.len(),
                _ => return None,
            };
            Some(Value::N(n.to_string()))
        }),
        Operand::IfNotExists(p, default) => match item.get(p) {
            Some(v) => Some(v.clone()),
            None => resolve(default, item)?,
        },
        Operand::Plus(a, b) | Operand::Minus(a, b) => {
            let minus = matches!(op, Operand::Minus(..));
            match (resolve(a, item)?, resolve(b, item)?) {
                (Some(Value::N(x)), Some(Value::N(y))) => Some(Value::N(arith(&x, &y, minus)?)),
                (None, _) | (_, None) => {
                    return Err(ExprError::Type(
                        "an operand of + or - refers to an attribute that does not exist".into(),
                    ));
                }
                _ => return Err(ExprError::Type("+ and - take numbers".into())),
            }
        }
    })
}

/// Evaluates a condition on `item` (empty for an item that does not exist).
pub(crate) fn holds(c: &Cond, item: &Attrs) -> Result<bool, ExprError> {
    use std::cmp::Ordering::*;
    Ok(match c {
        Cond::Exists(p) => item.contains_key(p),
        Cond::NotExists(p) => !item.contains_key(p),
        Cond::And(a, b) => holds(a, item)? && holds(b, item)?,
        Cond::Or(a, b) => holds(a, item)? || holds(b, item)?,
        Cond::Not(a) => !holds(a, item)?,
        Cond::Cmp(a, op, b) => {
            let (Some(a), Some(b)) = (resolve(a, item)?, resolve(b, item)?) else {
                return Ok(false);
            };
            match *op {
                "=" => a == b,
                "<>" => a != b,
                _ => match compare(&a, &b) {
                    None => false,
                    Some(o) => match *op {
                        "<" => o == Less,
                        "<=" => o != Greater,
                        ">" => o == Greater,
                        _ => o != Less,
                    },
                },
            }
        }
        Cond::Between(a, lo, hi) => {
            match (resolve(a, item)?, resolve(lo, item)?, resolve(hi, item)?) {
                (Some(a), Some(lo), Some(hi)) => {
                    compare(&a, &lo).is_some_and(|o| o != Less)
                        && compare(&a, &hi).is_some_and(|o| o != Greater)
                }
                _ => false,
            }
        }
        Cond::In(a, list) => match resolve(a, item)? {
            None => false,
            Some(a) => {
                let mut found = false;
                for v in list {
                    found |= resolve(v, item)?.as_ref() == Some(&a);
                }
                found
            }
        },
        Cond::BeginsWith(a, b) => match (resolve(a, item)?, resolve(b, item)?) {
            (Some(Value::S(a)), Some(Value::S(b))) => a.starts_with(&b),
            (Some(Value::B(a)), Some(Value::B(b))) => a.starts_with(&b),
            _ => false,
        },
        Cond::Contains(a, b) => match (resolve(a, item)?, resolve(b, item)?) {
            (Some(Value::S(a)), Some(Value::S(b))) => a.contains(&b),
            (Some(Value::L(a)), Some(b)) => a.contains(&b),
            _ => false,
        },
    })
}

/// Applies an update to `item`; on a type error nothing is applied.
pub(crate) fn apply(u: &Update, item: &mut Attrs) -> Result<(), ExprError> {
    // Every operand reads the item as it was before the update.
    let before = item.clone();
    let mut touched = BTreeSet::new();
    for action in &u.0 {
        let path = match action {
            Action::Set(p, _) | Action::Remove(p) | Action::Add(p, _) => p,
        };
        if !touched.insert(path.clone()) {
            return Err(ExprError::Syntax(format!(
                "two actions on one attribute ({path})"
            )));
        }
    }
    for action in &u.0 {
        match action {
            Action::Set(p, op) => match resolve(op, &before)? {
                Some(v) => {
                    item.insert(p.clone(), v);
                }
                None => {
                    return Err(ExprError::Type(
                        "SET refers to an attribute that does not exist".into(),
                    ));
                }
            },
            Action::Remove(p) => {
                item.remove(p);
            }
            Action::Add(p, op) => {
                let Some(Value::N(delta)) = resolve(op, &before)? else {
                    return Err(ExprError::Unsupported(
                        "ADD of anything but a number is not evaluated by the memory store".into(),
                    ));
                };
                let sum = match before.get(p) {
                    None => delta,
                    Some(Value::N(old)) => arith(old, &delta, false)?,
                    Some(_) => {
                        return Err(ExprError::Type(
                            "ADD to an attribute that is not a number".into(),
                        ));
                    }
                };
                item.insert(p.clone(), Value::N(sum));
            }
        }
    }
    Ok(())
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExprError::Syntax(s) | ExprError::Unsupported(s) | ExprError::Type(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, Value)]) -> Attrs {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn conditions_evaluate_like_dynamodb() {
        let names = BTreeMap::from([("#b".to_owned(), "balance".to_owned())]);
        let values = BTreeMap::from([(":need".to_owned(), Value::N("10".into()))]);
        let mut ph = Placeholders::new(&names, &values);
        let c = condition("#b >= :need AND attribute_exists(account)", &mut ph).expect("parse");
        ph.check_all_used().expect("all used");
        let rich = item(&[("account", "a".into()), ("balance", Value::N("12".into()))]);
        let poor = item(&[("account", "a".into()), ("balance", Value::N("9".into()))]);
        assert!(holds(&c, &rich).expect("eval"));
        assert!(!holds(&c, &poor).expect("eval"));
        assert!(!holds(&c, &Attrs::new()).expect("eval"), "absent item");
    }

    #[test]
    fn malformed_or_unused_placeholders_are_refused() {
        let names = BTreeMap::from([("#b".to_owned(), "balance".to_owned())]);
        let values = BTreeMap::from([(":a".to_owned(), Value::N("1".into()))]);
        let mut ph = Placeholders::new(&names, &values);
        assert!(matches!(
            update("ADD ADD #b :a ,,", &mut ph),
            Err(ExprError::Syntax(_))
        ));
        let mut ph = Placeholders::new(&names, &values);
        update("ADD #b :a", &mut ph).expect("parse");
        ph.check_all_used().expect("used");
        let mut ph = Placeholders::new(&names, &values);
        update("SET other = :a", &mut ph).expect("parse");
        assert!(ph.check_all_used().is_err(), "#b unused");
    }

    #[test]
    fn updates_apply_or_fail_whole() {
        let names = BTreeMap::new();
        let values = BTreeMap::from([
            (":a".to_owned(), Value::N("5".into())),
            (":z".to_owned(), Value::N("0".into())),
        ]);
        let mut ph = Placeholders::new(&names, &values);
        let u = update("ADD n :a SET m = if_not_exists(m, :z) + :a", &mut ph).expect("parse");
        let mut it = Attrs::new();
        apply(&u, &mut it).expect("apply");
        apply(&u, &mut it).expect("apply");
        assert_eq!(it.get("n"), Some(&Value::N("10".into())));
        assert_eq!(it.get("m"), Some(&Value::N("10".into())));
        let mut text = item(&[("n", "not-a-number".into())]);
        let before = text.clone();
        let r = apply(&u, &mut text);
        assert!(matches!(r, Err(ExprError::Type(_))), "{r:?}");
        // The caller discards the item on error; apply itself does not promise rollback, so
        // callers apply to a copy.
        let _ = before;
    }
}
