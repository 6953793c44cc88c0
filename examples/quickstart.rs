//! The native API in one page: connect through mgmd, create a table,
//! insert, read, update and delete rows in transactions, and handle errors
//! by their class.
//!
//! Start a cluster first (`cargo run --release -p shoal -- up`), then:
//!
//! ```sh
//! cargo run --release -p shoal-client --example quickstart [MGMD_HOST:PORT]
//! ```

use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, LockMode, ShoalError,
    TableDef, Value,
};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:1186".to_string());
    if let Err(e) = run(&addr).await {
        eprintln!(
            "quickstart failed: {e} (error {}, {})",
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
    let table = match cluster.table("quickstart").await {
        Ok(t) => t,
        Err(e) if e.code == ErrorCode::NoSuchTable => {
            let def = TableDef::new(
                "quickstart",
                vec![
                    ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
                    ColumnDef::new("name", ColumnType::VarChar(64)),
                    ColumnDef::new("balance", ColumnType::BigInt { unsigned: false })
                        .default_value(Value::Int(0)),
                ],
                &["id"],
            )?;
            cluster.create_table(def).await?
        }
        Err(e) => return Err(e),
    };
    let all = table.full_record();
    let names = table.record(&["id", "name"])?;

    // Several operations, one round trip. `write` is an upsert, so the
    // example can run again and again.
    let mut tx = cluster.transaction();
    tx.write(
        &all,
        &[Value::UInt(1), Value::Str("ada".into()), Value::Int(100)],
    )?;
    tx.write(
        &all,
        &[Value::UInt(2), Value::Str("grace".into()), Value::Int(50)],
    )?;
    tx.write(&names, &[Value::UInt(3), Value::Str("edsger".into())])?; // balance: its default
    tx.execute(ExecType::Commit).await?;
    println!("wrote 3 rows");

    // A transfer: read both balances with exclusive locks, then update both.
    let amount = 30;
    loop {
        match transfer(&cluster, &all, 1, 2, amount).await {
            Ok(()) => break,
            // Temporary errors (a lock wait timed out, the node is busy)
            // undo the whole transaction: retrying it is safe.
            Err(e) if e.class() == ErrorClass::Temporary => {
                eprintln!("retrying after a temporary error: {e}");
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    println!("moved {amount} from 1 to 2");

    // Committed reads take no locks.
    let mut tx = cluster.transaction();
    let reads: Vec<_> = (1..=3)
        .map(|id| tx.read(&all, &[Value::UInt(id)], LockMode::CommittedRead))
        .collect::<Result<_, _>>()?;
    tx.execute(ExecType::Commit).await?;
    for op in reads {
        if let Some(row) = tx.row(op) {
            println!(
                "  {:?} {:?} {:?}",
                row.get("id"),
                row.get("name"),
                row.get("balance")
            );
        }
    }

    // Errors carry a stable code, a message and a class.
    let mut tx = cluster.transaction();
    tx.insert(
        &all,
        &[Value::UInt(1), Value::Str("again".into()), Value::Int(0)],
    )?;
    match tx.execute(ExecType::Commit).await {
        Err(e) if e.code == ErrorCode::TupleAlreadyExists => {
            println!("duplicate insert refused: {e}")
        }
        other => println!("unexpected: {other:?}"),
    }
    // Bad values fail before anything is sent.
    let mut tx = cluster.transaction();
    if let Err(e) = tx.insert(
        &all,
        &[Value::UInt(9), Value::Str("x".repeat(100)), Value::Int(0)],
    ) {
        println!("refused locally: {e}");
    }

    // Delete, ignoring "not found" for a row that may not exist.
    let mut tx = cluster.transaction();
    tx.delete(&table, &[Value::UInt(3)])?;
    let maybe = tx.delete(&table, &[Value::UInt(999)])?;
    tx.ignore_error(maybe);
    tx.execute(ExecType::Commit).await?;
    println!(
        "deleted row 3 (row 999: {:?})",
        tx.op_error(maybe).map(|e| e.code)
    );
    Ok(())
}

async fn transfer(
    cluster: &Cluster,
    rec: &shoal_client::Record,
    from: u64,
    to: u64,
    amount: i64,
) -> Result<(), ShoalError> {
    let mut tx = cluster.transaction();
    let a = tx.read(rec, &[Value::UInt(from)], LockMode::Exclusive)?;
    let b = tx.read(rec, &[Value::UInt(to)], LockMode::Exclusive)?;
    tx.execute(ExecType::NoCommit).await?;
    let balance = |op| {
        tx.row(op)
            .and_then(|r| r.get("balance"))
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
    };
    let (fa, tb) = (balance(a), balance(b));
    let name = |op| {
        tx.row(op)
            .and_then(|r| r.get("name"))
            .unwrap_or(Value::Null)
    };
    let (na, nb) = (name(a), name(b));
    tx.update(rec, &[Value::UInt(from), na, Value::Int(fa - amount)])?;
    tx.update(rec, &[Value::UInt(to), nb, Value::Int(tb + amount)])?;
    tx.execute(ExecType::Commit).await
}
