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
    match Program::build(&k, "m:k", "m:", None, &zero) {
        Err(StoreError::Refused { code, position, .. }) => {
            assert_eq!(code, "INVALID_EXPIRE");
            assert_eq!(position, Some(2));
        }
        other => panic!("{other:?}"),
    }
    let big = [ValkeyEffect::incr_by("a", MAX_COUNTER + 1)];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", None, &big),
        Err(StoreError::Refused { .. })
    ));
}

#[test]
fn one_key_is_written_by_one_effect() {
    let k = event();
    let two = [ValkeyEffect::set("a", "1"), ValkeyEffect::del("a")];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", None, &two),
        Err(StoreError::Invalid(_))
    ));
    let twice = [ValkeyEffect::hset("h", [("f", "1")]).and(ValkeyEffect::hincr_by("h", "f", 1))];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", None, &twice),
        Err(StoreError::Invalid(_))
    ));
    let marks = [ValkeyEffect::del("m:other")];
    assert!(matches!(
        Program::build(&k, "m:k", "m:", None, &marks),
        Err(StoreError::Invalid(_))
    ));
    let settle = [ValkeyEffect::hset("h", [("s", "DONE")])
        .and(ValkeyEffect::hincr_by("h", "b", -3))
        .when(Guard::field_equals("h", "s", "PENDING"))];
    let p = Program::build(&k, "m:k", "m:", None, &settle).expect("distinct fields of one hash");
    assert_eq!(p.keys, vec!["m:k".to_owned(), "h".to_owned()]);
    assert_eq!(p.args.len(), 2 + 3 * 4);
}

#[test]
fn rediss_urls_are_accepted_and_verification_cannot_be_turned_off() {
    let retention = Retention::unchecked(Duration::from_secs(60)).expect("retention");
    let tls = ValkeyStore::from_url("rediss://cache.example.com:6380", retention)
        .expect("a rediss:// URL is TLS, built in");
    assert!(tls.tls);
    assert!(!store().tls);
    match ValkeyStore::from_url("rediss://cache.example.com:6380/#insecure", retention) {
        Err(StoreError::Invalid(why)) => assert!(why.contains("#insecure"), "{why}"),
        other => panic!("no verification must be refused: {other:?}"),
    }
    let roots = include_bytes!("../tests/fixtures/test-ca.pem");
    assert!(ValkeyStore::from_url_with_roots("rediss://127.0.0.1:6380", roots, retention).is_ok());
    assert!(matches!(
        ValkeyStore::from_url_with_roots("redis://127.0.0.1:6379", roots, retention),
        Err(StoreError::Invalid(_))
    ));
}

/// The Cluster specification's CRC16 (XMODEM) and hash tag rules, on its own examples.
#[test]
fn key_slots_follow_the_cluster_specification() {
    use crate::slot::{crc16, hashed_part, key_slot};
    assert_eq!(crc16(b"123456789"), 0x31C3);
    assert_eq!(key_slot("foo"), 12182);
    assert_eq!(key_slot("somekey"), 11058);
    assert_eq!(hashed_part("{user1000}.following"), "user1000");
    assert_eq!(
        key_slot("{user1000}.following"),
        key_slot("{user1000}.followers")
    );
    assert_eq!(hashed_part("foo{}{bar}"), "foo{}{bar}");
    assert_eq!(hashed_part("foo{{bar}}zap"), "{bar");
    assert_eq!(hashed_part("foo{bar}{zap}"), "bar");
    assert_eq!(hashed_part("no tag"), "no tag");
}

#[test]
fn with_a_hash_tag_the_mark_and_its_tagged_effects_share_one_slot() {
    use crate::slot::key_slot;
    let k = event();
    // Without a tag, the mark's slot is its whole key's: an effect key lands wherever.
    let plain = store();
    assert_eq!(
        plain.mark_key(&k),
        format!("{DEFAULT_PREFIX}{}", k.as_str())
    );
    assert_eq!(plain.slot_tag(&k), None);

    for tag in [HashTag::Event, HashTag::Fixed("acme".into())] {
        let s = store().with_hash_tag(tag.clone()).expect("tag");
        let mark = s.mark_key(&k);
        let t = s.slot_tag(&k).expect("a tag");
        let effects = [
            format!("outbox:{t}"),
            format!("{t}:balance"),
            format!("a{t}b{{other}}"),
        ];
        for e in &effects {
            assert_eq!(key_slot(e), key_slot(&mark), "{tag}: {e} and {mark}");
        }
        // And the store lets them through, the mark first.
        let ok = [ValkeyEffect::set(&effects[0], "1")
            .and(ValkeyEffect::hincr_by(&effects[1], "n", 1))
            .when(Guard::absent(&effects[2]))];
        let slot = Some(key_slot(&mark));
        let p = Program::build(&k, &mark, DEFAULT_PREFIX, slot, &ok).expect("one slot");
        assert!(p.keys.iter().all(|key| key_slot(key) == key_slot(&mark)));
        // A key of another slot is refused before anything is sent, naming both slots.
        let other = "balance:elsewhere";
        assert_ne!(key_slot(other), key_slot(&mark));
        for bad in [
            vec![
                ValkeyEffect::set(&effects[0], "1"),
                ValkeyEffect::del(other),
            ],
            vec![ValkeyEffect::set(&effects[0], "1").when(Guard::exists(other))],
        ] {
            match Program::build(&k, &mark, DEFAULT_PREFIX, slot, &bad) {
                Err(StoreError::Invalid(why)) => {
                    assert!(why.contains("CROSSSLOT"), "{why}");
                    assert!(why.contains(&key_slot(other).to_string()), "{why}");
                }
                other => panic!("{tag}: {other:?}"),
            }
        }
    }
    // The two tags do not put the same event in the same slot: the fixed tag is the tag's.
    let fixed = store()
        .with_hash_tag(HashTag::Fixed("acme".into()))
        .expect("tag");
    assert_eq!(key_slot(&fixed.mark_key(&k)), key_slot("acme"));
}

#[test]
fn hash_tags_that_would_move_the_slot_are_refused() {
    for tag in [HashTag::Fixed(String::new()), HashTag::Fixed("a}b".into())] {
        assert!(matches!(
            store().with_hash_tag(tag),
            Err(StoreError::Invalid(_))
        ));
    }
    assert!(matches!(
        store()
            .with_prefix("m:{x}:")
            .and_then(|s| s.with_hash_tag(HashTag::Event)),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store()
            .with_hash_tag(HashTag::Event)
            .and_then(|s| s.with_prefix("m:{x}:")),
        Err(StoreError::Invalid(_))
    ));
}

/// `WAIT n 0` blocks until `n` replicas answer, however long: a wait is always bounded, by
/// the limit and by a claim's deadline, and never zero.
#[test]
fn a_wait_for_replicas_is_bounded_never_wait_n_0() {
    let s = store();
    let limit = u64::try_from(WAIT_LIMIT.as_millis()).expect("ms");
    assert!(WAIT_LIMIT < CALL_LIMIT);
    assert_eq!(s.wait_ms(Duration::ZERO, None), limit);
    assert_eq!(s.wait_ms(Duration::from_secs(3600), None), limit);
    assert_eq!(s.wait_ms(Duration::from_millis(250), None), 250);
    let now = s.options.now();
    let soon = s.wait_ms(Duration::ZERO, Some(now + Duration::from_millis(300)));
    assert!((1..=300).contains(&soon), "{soon}");
    assert_eq!(
        s.wait_ms(Duration::ZERO, Some(now - Duration::from_secs(1))),
        1
    );
}
