//! Unique hash indexes with the native API: a table created with a unique
//! index, a duplicate refused, a row read, updated and deleted by its
//! unique key (one request each), and a unique index added online to a
//! table that holds rows.
//!
//! Start a cluster first (`cargo run --release -p shoal -- up`), then:
//!
//! ```sh
//! cargo run --release -p shoal-client --example unique [MGMD_HOST:PORT]
//! ```

use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorCode, ExecType, LockMode, ShoalError, TableDef, Value,
};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:1186".to_string());
    if let Err(e) = run(&addr).await {
        eprintln!(
            "unique failed: {e} (error {}, {})",
            e.code as u16,
            e.class().as_str()
        );
        std::process::exit(1);
    }
}

async fn run(addr: &str) -> Result<(), ShoalError> {
    let cluster = Cluster::connect(addr).await?;
    println!("connected to {addr} as API node {}", cluster.node_id());

    // Start afresh: the example makes its table with the index each run.
    match cluster.drop_table("unique_example").await {
        Ok(()) => {}
        Err(e) if e.code == ErrorCode::NoSuchTable => {}
        Err(e) => return Err(e),
    }
    // A unique index on `email`, created with the table (its hidden
    // table, keyed by the email, holds each row's primary key).
    let def = TableDef::new(
        "unique_example",
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("email", ColumnType::VarChar(64)).nullable(),
            ColumnDef::new("name", ColumnType::VarChar(32)),
        ],
        &["id"],
    )?
    .with_unique_index("by_email", &["email"])?;
    let table = cluster.create_table(def).await?;
    let all = table.full_record();

    let people = [
        (1, Some("ada@example.org"), "ada"),
        (2, Some("alan@example.org"), "alan"),
        (3, Some("grace@example.org"), "grace"),
        // NULLs are never equal: any number of rows may have none.
        (4, None, "anonymous"),
        (5, None, "nameless"),
    ];
    let mut tx = cluster.transaction();
    for (id, email, name) in people {
        tx.insert(
            &all,
            &[
                Value::UInt(id),
                email.map_or(Value::Null, |e| Value::Str(e.into())),
                Value::Str(name.into()),
            ],
        )?;
    }
    tx.execute(ExecType::Commit).await?;
    println!("inserted {} rows", people.len());

    // A second row with a held email fails the whole transaction.
    let mut tx = cluster.transaction();
    tx.insert(
        &all,
        &[
            Value::UInt(6),
            Value::Str("ada@example.org".into()),
            Value::Str("imposter".into()),
        ],
    )?;
    match tx.execute(ExecType::Commit).await {
        Err(e) if e.code == ErrorCode::TupleAlreadyExists => println!("duplicate refused: {e}"),
        other => println!("expected a duplicate error, got {other:?}"),
    }

    // Read by unique key: one request finds the entry, then the row.
    let by_email = cluster.unique_index("unique_example", "by_email").await?;
    let rec = table.record(&["id", "name"])?;
    let mut tx = cluster.transaction();
    let read = tx.read_unique(
        &rec,
        &by_email,
        &[Value::Str("grace@example.org".into())],
        LockMode::CommittedRead,
    )?;
    tx.execute(ExecType::Commit).await?;
    if let Some(row) = tx.row(read) {
        println!(
            "grace@example.org is id {:?}, name {:?}",
            row.get("id"),
            row.get("name")
        );
    }

    // Update by unique key: the record lists the columns to set (never
    // the primary key). Changing the email itself moves the index entry.
    let set = table.record(&["name", "email"])?;
    let mut tx = cluster.transaction();
    tx.update_unique(
        &set,
        &by_email,
        &[Value::Str("alan@example.org".into())],
        &[
            Value::Str("alan t.".into()),
            Value::Str("turing@example.org".into()),
        ],
    )?;
    tx.execute(ExecType::Commit).await?;
    println!("alan@example.org is now turing@example.org");

    // Delete by unique key; a key nobody holds fails with 626, or, with
    // ignore_error, is only reported.
    let mut tx = cluster.transaction();
    tx.delete_unique(&by_email, &[Value::Str("ada@example.org".into())])?;
    let missing = tx.delete_unique(&by_email, &[Value::Str("nobody@example.org".into())])?;
    tx.ignore_error(missing);
    tx.execute(ExecType::Commit).await?;
    println!(
        "deleted ada; nobody@example.org: {}",
        tx.op_error(missing)
            .map_or("found".into(), |e| e.to_string())
    );

    // A unique index added to a table with rows, built online (writes
    // may go on meanwhile). Names are unique, so it holds.
    let table = cluster
        .create_unique_index("unique_example", "by_name", &["name"])
        .await?;
    println!(
        "unique indexes now: {:?}",
        table
            .def()
            .unique_indexes
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>()
    );
    let by_name = cluster.unique_index("unique_example", "by_name").await?;
    let mut tx = cluster.transaction();
    let read = tx.read_unique(
        &table.record(&["id", "email"])?,
        &by_name,
        &[Value::Str("alan t.".into())],
        LockMode::CommittedRead,
    )?;
    tx.execute(ExecType::Commit).await?;
    if let Some(row) = tx.row(read) {
        println!(
            "name \"alan t.\": id {:?}, email {:?}",
            row.get("id"),
            row.get("email")
        );
    }
    let mut tx = cluster.transaction();
    tx.insert(
        &all,
        &[Value::UInt(7), Value::Null, Value::Str("grace".into())],
    )?;
    // `name` is now unique-indexed: the duplicate name is refused too.
    match tx.execute(ExecType::Commit).await {
        Err(e) if e.code == ErrorCode::TupleAlreadyExists => println!("by_name refused: {e}"),
        other => println!("expected a duplicate error, got {other:?}"),
    }
    // Dropped, the index no longer keeps names apart; created again over
    // names that repeat, its build fails, naming two rows that share one,
    // and no index is left behind.
    cluster.drop_index("unique_example", "by_name").await?;
    let mut tx = cluster.transaction();
    tx.insert(
        &all,
        &[Value::UInt(7), Value::Null, Value::Str("grace".into())],
    )?;
    tx.execute(ExecType::Commit).await?;
    match cluster
        .create_unique_index("unique_example", "by_name", &["name"])
        .await
    {
        Err(e) if e.code == ErrorCode::TupleAlreadyExists => println!("build refused: {e}"),
        other => println!("expected the build to fail, got {other:?}"),
    }
    cluster.close().await;
    Ok(())
}
