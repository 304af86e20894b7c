//! The servers from the wheels, started as a user's test starts them: each answers at its URL
//! and, dropped, stops and leaves nothing in the temporary folder. They need the venv
//! `LAMBDA_DEDUP_TESTKIT_VENV` names (`cargo xtask test` sets it); without it they are skipped
//! with a message (a first run elsewhere would download the wheels).

#![cfg(all(feature = "postgres", feature = "valkey"))]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use lambda_dedup_testkit::postgres::Postgres;
use lambda_dedup_testkit::valkey::Valkey;
use lambda_dedup_testkit::{VENV_VAR, Venv};

fn venv(test: &str) -> Option<Venv> {
    if std::env::var_os(VENV_VAR).is_none() {
        eprintln!("{test} skipped: {VENV_VAR} is not set; `cargo xtask test` sets it");
        return None;
    }
    Some(Venv::from_env().expect("the venv"))
}

/// `host:port` of a URL `scheme://[user@]host:port[/…]`.
fn address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

fn folders_of(name: &str) -> usize {
    let prefix = format!("lambda-dedup-testkit-{name}-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .count()
        })
        .unwrap_or_default()
}

/// The server answers at its URL (one server in this binary: its folders are counted per
/// process); the mark table the kit creates is the PostgreSQL store's own (its columns, from the
/// store's schema); the test's connection creates, writes and reads a table of its own; a mark
/// table name the store refuses is an error, not a table; dropped, it stops and leaves nothing.
#[tokio::test]
async fn postgres_serves_mark_tables_and_sql_and_is_gone_once_dropped() {
    let Some(venv) = venv("postgres_serves_mark_tables_and_sql_and_is_gone_once_dropped") else {
        return;
    };
    let pg = Postgres::start_in(&venv).expect("PostgreSQL");
    assert!(
        pg.url().starts_with("postgresql://postgres@127.0.0.1:"),
        "{}",
        pg.url()
    );
    assert!(pg.bin().join("postgres").is_file());
    let addr = address(pg.url());
    TcpStream::connect(&addr).expect("listening");
    assert_eq!(folders_of("postgres"), 1);
    pg.create_mark_table("marks").await.expect("the mark table");
    let sql = pg.connect().await.expect("a connection");
    let columns = sql
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_name = 'marks' ORDER BY ordinal_position",
            &[],
        )
        .await
        .expect("the columns");
    let columns: Vec<String> = columns.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        columns,
        [
            "key",
            "status",
            "owner",
            "lease_expires_at",
            "expires_at",
            "fingerprint",
            "result",
            "first_seen_at",
            "completed_at"
        ]
    );
    sql.batch_execute(
        "CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL); \
         INSERT INTO balances VALUES ('a-1', 5)",
    )
    .await
    .expect("the test's own table");
    let rows = sql
        .query("SELECT balance FROM balances WHERE account = $1", &[&"a-1"])
        .await
        .expect("read back");
    assert_eq!(rows.first().map(|r| r.get::<_, i64>(0)), Some(5));
    assert!(matches!(
        pg.create_mark_table("no; table").await,
        Err(lambda_dedup_testkit::Error::Table(_))
    ));
    drop(sql);
    drop(pg);
    assert!(TcpStream::connect(&addr).is_err(), "still listening");
    assert_eq!(folders_of("postgres"), 0, "its folder left behind");
}

#[test]
fn valkey_answers_ping_at_its_url_and_is_gone_once_dropped() {
    let Some(venv) = venv("valkey_answers_ping_at_its_url_and_is_gone_once_dropped") else {
        return;
    };
    let valkey = Valkey::start_in(&venv).expect("Valkey");
    let addr = address(valkey.url());
    let mut conn = TcpStream::connect(&addr).expect("listening");
    conn.write_all(b"PING\r\n").expect("sent");
    let mut answer = [0u8; 7];
    conn.read_exact(&mut answer).expect("answered");
    assert_eq!(&answer, b"+PONG\r\n");
    drop(conn);
    drop(valkey);
    assert!(TcpStream::connect(&addr).is_err(), "still listening");
    assert_eq!(folders_of("valkey"), 0, "its folder left behind");
}
