//! Scans with the native API: read every row of a table a round at a
//! time, let the data nodes filter rows before they cross the network,
//! stop a scan early, add an ordered index to a table with rows and scan a
//! range of it in order, find a key through the primary key's index, and
//! lock what a scan returns.
//!
//! Start a cluster first (`cargo run --release -p shoal -- up`), then:
//!
//! ```sh
//! cargo run --release -p shoal-client --example scan [MGMD_HOST:PORT]
//! ```

use std::ops::Bound;

use shoal_client::{
    Cluster, CmpOp, ColumnDef, ColumnType, ErrorCode, ExecType, FilterExpr, LockMode, RowBuf,
    ShoalError, TableDef, Value,
};

const NAMES: [&str; 10] = [
    "ada", "alan", "anita", "barbara", "grace", "alonzo", "edsger", "amir", "john", "annie",
];

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:1186".to_string());
    if let Err(e) = run(&addr).await {
        eprintln!(
            "scan failed: {e} (error {}, {})",
            e.code as u16,
            e.class().as_str()
        );
        std::process::exit(1);
    }
}

async fn run(addr: &str) -> Result<(), ShoalError> {
    let cluster = Cluster::connect(addr).await?;
    println!("connected to {addr} as API node {}", cluster.node_id());

    // Create the table unless an earlier run did.
    let table = match cluster.table("scan_example").await {
        Ok(t) => t,
        Err(e) if e.code == ErrorCode::NoSuchTable => {
            let def = TableDef::new(
                "scan_example",
                vec![
                    ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
                    ColumnDef::new("name", ColumnType::VarChar(32)),
                    ColumnDef::new("balance", ColumnType::BigInt { unsigned: false }),
                ],
                &["id"],
            )?;
            cluster.create_table(def).await?
        }
        Err(e) => return Err(e),
    };

    // Some rows, in one transaction (`write` is an upsert, so the example
    // can run again and again).
    let all = table.full_record();
    let mut tx = cluster.transaction();
    for (i, name) in NAMES.iter().enumerate() {
        let id = i as u64 + 1;
        tx.write(
            &all,
            &[
                Value::UInt(id),
                Value::Str((*name).into()),
                Value::Int(id as i64 * 30),
            ],
        )?;
    }
    tx.execute(ExecType::Commit).await?;
    println!("wrote {} rows", NAMES.len());

    // Every row, every column, in rounds of at most 4 rows (a small batch
    // to show several rounds; the default is 256 rows or 256 KiB).
    let tx = cluster.transaction();
    let mut scan = tx.scan(&table).batch(4, 64 * 1024).open().await?;
    println!("full scan:");
    let mut rows = 0;
    while let Some(row) = scan.next_row().await? {
        print_row(row);
        rows += 1;
    }
    println!("  {rows} rows, {} rows examined", scan.rows_examined());

    // `balance > 100 AND name LIKE 'a%'`, run by the data nodes: only the
    // matching rows come back, but every row is examined.
    let mut scan = tx
        .scan(&table)
        .columns(&["id", "name", "balance"])
        .filter_with(|t| {
            Ok(FilterExpr::And(vec![
                FilterExpr::Cmp {
                    col: t.column_id("balance")?,
                    op: CmpOp::Gt,
                    value: Value::Int(100),
                },
                FilterExpr::Like {
                    col: t.column_id("name")?,
                    pattern: b"a%".to_vec(),
                },
            ]))
        })
        .open()
        .await?;
    let matching = scan.collect_all().await?;
    println!("balance > 100 AND name LIKE 'a%':");
    for row in &matching {
        print_row(row);
    }
    println!(
        "  {} rows, {} rows examined",
        matching.len(),
        scan.rows_examined()
    );

    // A scan stopped early: `close` tells the data node at once (dropping
    // an unfinished scan does the same without waiting).
    let mut scan = tx
        .scan(&table)
        .columns(&["name"])
        .batch(2, 4096)
        .open()
        .await?;
    if let Some(row) = scan.next_row().await? {
        println!("first name found: {:?}", row.get("name"));
    }
    scan.close().await?;

    // An ordered index on `balance`, added to the table while it has rows
    // (built online by every data node), then an ordered range scan of
    // it: 50 <= balance < 200, largest first.
    let table = match table.def().index_number("by_balance") {
        Some(_) => table,
        None => {
            cluster
                .create_index("scan_example", "by_balance", &["balance"])
                .await?
        }
    };
    let tx = cluster.transaction();
    let mut scan = tx
        .scan(&table)
        .index("by_balance")
        .range(
            Bound::Included(&[Value::Int(50)]),
            Bound::Excluded(&[Value::Int(200)]),
        )
        .ordered()
        .descending()
        .open()
        .await?;
    println!("50 <= balance < 200, by balance, descending:");
    while let Some(row) = scan.next_row().await? {
        print_row(row);
    }
    // The primary key's ordered index: one key, found by an equality
    // bound (the scan asks only the fragment that key hashes to).
    let mut scan = tx
        .scan(&table)
        .index("PRIMARY")
        .eq(&[Value::UInt(2)])
        .open()
        .await?;
    for row in scan.collect_all().await? {
        println!("id 2 by its index:");
        print_row(&row);
    }

    // A shared-lock scan: every row it returns stays locked in `tx` until
    // it commits, so the sum below cannot move under it.
    let mut tx = cluster.transaction();
    let mut scan = tx
        .scan(&table)
        .lock(LockMode::Shared)
        .open_locking(&mut tx)
        .await?;
    let mut total = 0;
    while let Some(row) = scan.next_row().await? {
        if let Some(Value::Int(b)) = row.get("balance") {
            total += b;
        }
    }
    drop(scan);
    tx.execute(ExecType::Commit).await?;
    println!("total balance, under shared locks: {total}");

    // Building errors surface at `open`, before anything is sent.
    match tx.scan(&table).columns(&["nope"]).open().await {
        Err(e) if e.code == ErrorCode::NoSuchColumn => println!("refused locally: {e}"),
        other => println!("unexpected: {other:?}"),
    }
    Ok(())
}

fn print_row(row: &RowBuf) {
    let cols: Vec<String> = row
        .values()
        .into_iter()
        .map(|(_, v)| format!("{v:?}"))
        .collect();
    println!("  {}", cols.join(" "));
}
