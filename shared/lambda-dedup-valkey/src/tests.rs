//! Unit tests without a server: what the store judges before it sends anything. The store on
//! a real server is tested by the conformance suite and the chaos run (`tests/integration`).

use super::*;
use crate::program::Program;

fn store() -> ValkeyStore {
    let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
    ValkeyStore::from_url("redis://127.0.0.1:1", retention).expect("url")
}

fn event() -> DedupKey {
    let scope = lambda_dedup::Scope::new("unit", "valkey").expect("scope");
    DedupKey::new(&scope, "acme", &["evt-1"])
}

#[test]
fn bad_urls_and_prefixes_are_typed_errors() {
    let retention = Retention::unchecked(Duration::from_secs(60)).expect("retention");
    assert!(matches!(
        ValkeyStore::from_url("not a url", retention),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store().with_prefix(""),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn commands_refused_as_they_are_never_reach_the_server() {
    let k = event();
    let zero = [
        ValkeyEffect::set("a", "1"),
        ValkeyEffect::set_px("b", "1", Duration::ZERO),
    ];
    match Program::build(&k, "m:k", "m:", &zero) {
        Err(StoreError::Refused { code, position, .. }) => {
            assert_eq!(code, "INVALID_EXPIRE");
            assert_eq!(position, Some(2));
        }
        other => panic!("{other:?}"),
    }
    let big = [ValkeyEffect::incr_by("a", MAX_COUNTER + 1)];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", &big),
        Err(StoreError::Refused { .. })
    ));
}

#[test]
fn one_key_is_written_by_one_effect() {
    let k = event();
    let two = [ValkeyEffect::set("a", "1"), ValkeyEffect::del("a")];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", &two),
        Err(StoreError::Invalid(_))
    ));
    let twice = [ValkeyEffect::hset("h", [("f", "1")]).and(ValkeyEffect::hincr_by("h", "f", 1))];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", &twice),
        Err(StoreError::Invalid(_))
    ));
    let marks = [ValkeyEffect::del("m:other")];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", &marks),
        Err(StoreError::Invalid(_))
    ));
    let settle = [ValkeyEffect::hset("h", [("s", "DONE")])
        .and(ValkeyEffect::hincr_by("h", "b", -3))
        .when(Guard::field_equals("h", "s", "PENDING"))];
    let p = Program::build(&k, "m:k", "m:", &settle).expect("distinct fields of one hash");
    assert_eq!(p.keys, vec!["m:k".to_owned(), "h".to_owned()]);
    assert_eq!(p.args.len(), 2 + 3 * 4);
}
