//! The accounts: the rules of each change (pure), checked against a
//! model under random changes; their file; and mgmd keeping them across
//! a restart.

use super::*;
use crate::client::MgmClient;
use crate::proto::{Grants, StoredPassword};
use crate::store::Store;

fn name(user: &str, host: &str) -> AccountName {
    AccountName::new(user, host)
}

fn hash(seed: u8) -> StoredPassword {
    StoredPassword {
        native: format!("{seed:02x}").repeat(20),
        sha256: Some(format!("{seed:02X}").repeat(32)),
    }
}

fn account(user: &str, host: &str, password: Option<StoredPassword>) -> UserAccount {
    UserAccount {
        user: user.into(),
        host: host.into(),
        password,
        grants: Grants::default(),
    }
}

fn create(accounts: &[UserAccount]) -> UsersRequest {
    UsersRequest::Create {
        accounts: accounts.to_vec(),
        if_not_exists: false,
    }
}

#[test]
fn a_fresh_cluster_has_root_from_this_machine_only_without_password() {
    let accounts = default_accounts();
    let names: Vec<AccountName> = accounts.keys().cloned().collect();
    assert_eq!(
        names,
        vec![name("root", "127.0.0.1"), name("root", "localhost")]
    );
    for a in accounts.values() {
        assert_eq!(a.password, None);
        assert!(a.grants.all_databases);
        assert!(a.grants.databases.is_empty());
    }
}

#[test]
fn changes_follow_the_rules_and_fail_whole() {
    let mut accounts = default_accounts();
    // Hosts are kept in lower case, hashes in upper case.
    let made = apply(
        &mut accounts,
        create(&[account("app", "LOCALHOST", Some(hash(0xab)))]),
    )
    .unwrap();
    assert_eq!(made.len(), 1);
    let app = &accounts[&name("app", "localhost")];
    let password = app.password.clone().unwrap();
    assert_eq!(password.native, "AB".repeat(20));
    assert!(app.grants == Grants::default());

    // One existing account fails the whole create; IF NOT EXISTS skips it.
    let before = accounts.clone();
    let both = [account("new", "%", None), account("app", "localhost", None)];
    let err = apply(&mut accounts, create(&both)).unwrap_err();
    assert_eq!(err.code, ErrorCode::UserExists);
    assert!(err.detail.contains("'app'@'localhost'"), "{}", err.detail);
    assert_eq!(accounts, before);
    let made = apply(
        &mut accounts,
        UsersRequest::Create {
            accounts: both.to_vec(),
            if_not_exists: true,
        },
    )
    .unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(accounts[&name("app", "localhost")].password, Some(password));

    // Grants: held twice is one grant; revoking what is not held fails.
    let grant = |level: GrantLevel| UsersRequest::Grant {
        accounts: vec![name("app", "localhost")],
        level,
    };
    apply(&mut accounts, grant(GrantLevel::Database("shop".into()))).unwrap();
    apply(&mut accounts, grant(GrantLevel::Database("shop".into()))).unwrap();
    assert_eq!(
        accounts[&name("app", "localhost")]
            .grants
            .databases
            .iter()
            .collect::<Vec<_>>(),
        vec!["shop"]
    );
    let revoke = |level: GrantLevel| UsersRequest::Revoke {
        accounts: vec![name("app", "localhost")],
        level,
    };
    let err = apply(&mut accounts, revoke(GrantLevel::AllDatabases)).unwrap_err();
    assert_eq!(err.code, ErrorCode::NoSuchGrant);
    apply(&mut accounts, revoke(GrantLevel::Database("shop".into()))).unwrap();
    let err = apply(&mut accounts, revoke(GrantLevel::Database("shop".into()))).unwrap_err();
    assert_eq!(err.code, ErrorCode::NoSuchGrant);
    let err = apply(
        &mut accounts,
        UsersRequest::Grant {
            accounts: vec![name("ghost", "%")],
            level: GrantLevel::AllDatabases,
        },
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NoSuchUser);

    // Passwords change; dropping a missing account fails unless IF EXISTS.
    apply(
        &mut accounts,
        UsersRequest::SetPassword {
            changes: vec![PasswordChange {
                account: name("app", "Localhost"),
                password: None,
            }],
            if_exists: false,
        },
    )
    .unwrap();
    assert_eq!(accounts[&name("app", "localhost")].password, None);
    let before = accounts.clone();
    let drop = |if_exists| UsersRequest::Drop {
        accounts: vec![name("app", "localhost"), name("ghost", "%")],
        if_exists,
    };
    assert_eq!(
        apply(&mut accounts, drop(false)).unwrap_err().code,
        ErrorCode::NoSuchUser
    );
    assert_eq!(accounts, before);
    let dropped = apply(&mut accounts, drop(true)).unwrap();
    assert_eq!(dropped.len(), 1);
    assert!(!accounts.contains_key(&name("app", "localhost")));
    assert_eq!(
        apply(&mut accounts, UsersRequest::List { user: None }).unwrap(),
        list(&accounts, None)
    );
}

#[test]
fn bad_names_hashes_and_counts_are_refused() {
    let mut accounts = default_accounts();
    let long_user = "u".repeat(USER_NAME_CHARS_MAX + 1);
    let long_host = "h".repeat(HOST_BYTES_MAX + 1);
    let bad_hash = StoredPassword {
        native: "12".into(),
        sha256: None,
    };
    let bad_sha = StoredPassword {
        native: "A".repeat(40),
        sha256: Some("Z".repeat(64)),
    };
    for bad in [
        account("", "%", None),
        account(&long_user, "%", None),
        account("tab\tuser", "%", None),
        account("u", "", None),
        account("u", &long_host, None),
        account("u", "10.0.0.0/255.0.0.0", None),
        account("u", "a b", None),
        account("u", "%", Some(bad_hash.clone())),
        account("u", "%", Some(bad_sha.clone())),
    ] {
        let err = apply(&mut accounts, create(std::slice::from_ref(&bad))).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadRequest, "{bad:?}");
    }
    // Multi-byte user names count characters, not bytes.
    let wide = "é".repeat(USER_NAME_CHARS_MAX);
    apply(&mut accounts, create(&[account(&wide, "%", None)])).unwrap();
    for bad in ["information_schema", "bad-name", ""] {
        let err = apply(
            &mut accounts,
            UsersRequest::Grant {
                accounts: vec![name("root", "localhost")],
                level: GrantLevel::Database(bad.into()),
            },
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::BadRequest, "{bad}: {err}");
    }
    let none = UsersRequest::Drop {
        accounts: vec![],
        if_exists: true,
    };
    assert_eq!(
        apply(&mut accounts, none).unwrap_err().code,
        ErrorCode::BadRequest
    );
    let many: Vec<UserAccount> = (0..=ACCOUNTS_PER_REQUEST_MAX)
        .map(|i| account(&format!("u{i}"), "%", None))
        .collect();
    assert_eq!(
        apply(&mut accounts, create(&many)).unwrap_err().code,
        ErrorCode::BadRequest
    );
    let twice = [account("u", "%", None), account("u", "%", None)];
    assert_eq!(
        apply(&mut accounts, create(&twice)).unwrap_err().code,
        ErrorCode::BadRequest
    );
}

#[test]
fn the_account_count_is_bounded() {
    let mut accounts = Accounts::new();
    for chunk in 0..ACCOUNTS_MAX / ACCOUNTS_PER_REQUEST_MAX {
        let batch: Vec<UserAccount> = (0..ACCOUNTS_PER_REQUEST_MAX)
            .map(|i| account(&format!("u{chunk}_{i}"), "%", None))
            .collect();
        apply(&mut accounts, create(&batch)).unwrap();
    }
    assert_eq!(accounts.len(), ACCOUNTS_MAX);
    let err = apply(&mut accounts, create(&[account("one", "%", None)])).unwrap_err();
    assert_eq!(err.code, ErrorCode::RequestTooLarge);
    assert_eq!(accounts.len(), ACCOUNTS_MAX);
}

/// The model: per account, its password seed and its grants; each change
/// either applies to every account it names or to none.
type Model = BTreeMap<(String, String), (Option<u8>, bool, BTreeSet<String>)>;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn random_changes_match_the_model() {
    const USERS: [&str; 3] = ["a", "b", "c"];
    const HOSTS: [&str; 2] = ["%", "localhost"];
    const DATABASES: [&str; 2] = ["d1", "d2"];
    for seed in 1..=20u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut accounts = Accounts::new();
        let mut model = Model::new();
        for step in 0..300 {
            let count = 1 + rng.below(2) as usize;
            let picked: Vec<(String, String)> = (0..count)
                .map(|_| {
                    (
                        USERS[rng.below(3) as usize].to_string(),
                        HOSTS[rng.below(2) as usize].to_string(),
                    )
                })
                .collect();
            let names: Vec<AccountName> = picked.iter().map(|(u, h)| name(u, h)).collect();
            let distinct: BTreeSet<&(String, String)> = picked.iter().collect();
            let exists = |m: &Model, k: &(String, String)| m.contains_key(k);
            let flag = rng.below(2) == 1;
            let seed_byte = rng.below(250) as u8;
            let level = match rng.below(3) {
                0 => GrantLevel::AllDatabases,
                i => GrantLevel::Database(DATABASES[i as usize - 1].to_string()),
            };
            let holds = |m: &Model, k: &(String, String)| {
                m.get(k).is_some_and(|(_, all, dbs)| match &level {
                    GrantLevel::AllDatabases => *all,
                    GrantLevel::Database(d) => dbs.contains(d),
                })
            };
            let (request, expect_ok) = match rng.below(5) {
                0 => (
                    UsersRequest::Create {
                        accounts: picked
                            .iter()
                            .map(|(u, h)| account(u, h, Some(hash(seed_byte))))
                            .collect(),
                        if_not_exists: flag,
                    },
                    distinct.len() == picked.len()
                        && (flag || picked.iter().all(|k| !exists(&model, k))),
                ),
                1 => (
                    UsersRequest::Drop {
                        accounts: names.clone(),
                        if_exists: flag,
                    },
                    flag || picked.iter().all(|k| exists(&model, k)),
                ),
                2 => (
                    UsersRequest::SetPassword {
                        changes: names
                            .iter()
                            .map(|n| PasswordChange {
                                account: n.clone(),
                                password: Some(hash(seed_byte)),
                            })
                            .collect(),
                        if_exists: flag,
                    },
                    flag || picked.iter().all(|k| exists(&model, k)),
                ),
                3 => (
                    UsersRequest::Grant {
                        accounts: names.clone(),
                        level: level.clone(),
                    },
                    picked.iter().all(|k| exists(&model, k)),
                ),
                _ => (
                    UsersRequest::Revoke {
                        accounts: names.clone(),
                        level: level.clone(),
                    },
                    picked.iter().all(|k| holds(&model, k)),
                ),
            };
            let kind = users_request_kind(&request);
            let result = apply(&mut accounts, request);
            assert_eq!(
                result.is_ok(),
                expect_ok,
                "seed {seed} step {step}: {kind} of {picked:?} gave {result:?}; model {model:?}"
            );
            if expect_ok {
                for k in &picked {
                    match kind {
                        "create" => {
                            model.entry(k.clone()).or_insert((
                                Some(seed_byte),
                                false,
                                BTreeSet::new(),
                            ));
                        }
                        "drop" => {
                            model.remove(k);
                        }
                        "set password" => {
                            if let Some(e) = model.get_mut(k) {
                                e.0 = Some(seed_byte);
                            }
                        }
                        "grant" | "revoke" => {
                            let e = model.get_mut(k).expect("checked above");
                            let on = kind == "grant";
                            match &level {
                                GrantLevel::AllDatabases => e.1 = on,
                                GrantLevel::Database(d) if on => {
                                    e.2.insert(d.clone());
                                }
                                GrantLevel::Database(d) => {
                                    e.2.remove(d);
                                }
                            }
                        }
                        other => unreachable!("{other}"),
                    }
                }
            }
            let seen: Model = accounts
                .values()
                .map(|a| {
                    let seed = a.password.as_ref().map(|p| {
                        u8::from_str_radix(&p.native[..2], 16).expect("hex written by hash()")
                    });
                    (
                        (a.user.clone(), a.host.clone()),
                        (seed, a.grants.all_databases, a.grants.databases.clone()),
                    )
                })
                .collect();
            assert_eq!(seen, model, "seed {seed} step {step} after {kind}");
        }
    }
}

#[tokio::test]
async fn the_accounts_file_round_trips_and_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // No file yet: a fresh cluster's accounts.
    assert_eq!(store.load_users(7).unwrap(), default_accounts());
    let mut accounts = default_accounts();
    let mut app = account("app", "10.0.%", Some(hash(3)));
    app.grants.databases.insert("shop".into());
    apply(&mut accounts, create(&[app])).unwrap();
    store.save_users(7, &accounts).await.unwrap();
    assert_eq!(store.load_users(7).unwrap(), accounts);
    let text = std::fs::read_to_string(dir.path().join(USERS_FILE)).unwrap();
    assert!(text.contains("\"native\""), "{text}");

    // Another cluster's file, a bad hash, a duplicate, bad JSON.
    let err = store.load_users(8).unwrap_err();
    assert!(err.detail.contains("cluster id"), "{err}");
    let bad_hash = text.replacen(&"03".repeat(20), "nothex", 1);
    assert_ne!(bad_hash, text);
    std::fs::write(dir.path().join(USERS_FILE), &bad_hash).unwrap();
    let err = store.load_users(7).unwrap_err();
    assert!(err.detail.contains("inconsistent"), "{err}");
    let twice = text
        .replace("\"10.0.%\"", "\"localhost\"")
        .replace("\"app\"", "\"root\"");
    std::fs::write(dir.path().join(USERS_FILE), twice).unwrap();
    let err = store.load_users(7).unwrap_err();
    assert!(err.detail.contains("twice"), "{err}");
    std::fs::write(dir.path().join(USERS_FILE), "{").unwrap();
    let err = store.load_users(7).unwrap_err();
    assert!(err.detail.contains("corrupt"), "{err}");
}

/// Starts mgmd on `dir`; the sender stops it.
async fn start_mgmd(
    dir: &std::path::Path,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ShoalError>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = ClusterConfig::local(1, 1, port, dir);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(config, listener, async {
        let _ = stopped.await;
    }));
    (format!("127.0.0.1:{port}"), stop, task)
}

#[tokio::test]
async fn mgmd_keeps_the_accounts_across_a_restart_and_lists_them_to_api_nodes_only() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, task) = start_mgmd(dir.path()).await;
    let mut api = MgmClient::connect(&addr)
        .await
        .unwrap()
        .register_api()
        .await
        .unwrap();
    let listed = api.users(UsersRequest::List { user: None }).await.unwrap();
    assert_eq!(listed, list(&default_accounts(), None));
    // Nothing is written until something changes.
    assert!(!dir.path().join(USERS_FILE).exists());
    api.users(create(&[account("app", "%", Some(hash(9)))]))
        .await
        .unwrap();
    api.users(UsersRequest::Grant {
        accounts: vec![name("app", "%")],
        level: GrantLevel::Database("shop".into()),
    })
    .await
    .unwrap();
    api.users(UsersRequest::Drop {
        accounts: vec![name("root", "localhost")],
        if_exists: false,
    })
    .await
    .unwrap();
    let err = api
        .users(create(&[account("app", "%", None)]))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::UserExists);
    let want = api.users(UsersRequest::List { user: None }).await.unwrap();
    assert_eq!(want.len(), 2);
    drop(api);
    drop(stop);
    task.await.unwrap().unwrap();

    let (addr, stop, task) = start_mgmd(dir.path()).await;
    let mut api = MgmClient::connect(&addr)
        .await
        .unwrap()
        .register_api()
        .await
        .unwrap();
    assert_eq!(
        api.users(UsersRequest::List { user: None }).await.unwrap(),
        want
    );
    let app = api
        .users(UsersRequest::List {
            user: Some("app".into()),
        })
        .await
        .unwrap();
    assert_eq!(app.len(), 1);
    assert_eq!(app[0].password, Some(hash(9)));
    assert!(app[0].grants.databases.contains("shop"));
    drop(api);

    // A connection that is not an API node is refused.
    let raw = raw_request(&addr, Request::Users(UsersRequest::List { user: None })).await;
    match raw {
        Response::Error(e) => assert_eq!(e.code, ErrorCode::BadRequest as u16),
        other => panic!("expected a refusal, got {other:?}"),
    }
    drop(stop);
    task.await.unwrap().unwrap();
}

/// Sends one request on a fresh, unregistered connection.
async fn raw_request(addr: &str, request: Request) -> Response {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let frame = encode_frame(&ClientFrame {
        v: PROTOCOL_VERSION,
        id: 1,
        request,
    })
    .unwrap();
    crate::proto::write_encoded(&mut stream, &frame)
        .await
        .unwrap();
    let body = read_frame(&mut stream, FRAME_BYTES_MAX)
        .await
        .unwrap()
        .unwrap();
    match serde_json::from_slice::<ServerFrame>(&body).unwrap().msg {
        ServerMessage::Response { response, .. } => response,
        other => panic!("unexpected {other:?}"),
    }
}
