//! SQL accounts through the native API: create, change and drop the
//! accounts SQL nodes log clients in with, and grant or revoke ALL on a
//! database or on every database. mgmd keeps them (durably, in its
//! `users.json`), so every SQL node of the cluster sees the same ones.
//!
//! Passwords travel and are kept only as hashes ([`StoredPassword`]:
//! SHA1(SHA1(pw)) and SHA256(SHA256(pw)) in hex, what MySQL's two login
//! plugins check); the SQL node's `PasswordHashes::of` computes them.
//! mgmd answers these requests to API nodes only, and trusts every API
//! node with them, as it does with the schema.
//!
//! Each call is one mgmd request, all or nothing: one account that fails
//! (exists already, does not exist, lacks the grant) fails the call and
//! changes nothing.

use crate::cluster::Cluster;
use shoal_mgmd::proto::{
    AccountName, GrantLevel, PasswordChange, StoredPassword, UserAccount, UsersRequest,
};
use shoal_types::ShoalError;

impl Cluster {
    /// Creates `accounts` (with their passwords and grants); returns those
    /// created. An existing one fails the call with `UserExists` (6004),
    /// or is left as it is if `if_not_exists`. Bad names or hashes:
    /// `BadRequest` (4000).
    pub async fn create_users(
        &self,
        accounts: Vec<UserAccount>,
        if_not_exists: bool,
    ) -> Result<Vec<UserAccount>, ShoalError> {
        self.users_request(UsersRequest::Create {
            accounts,
            if_not_exists,
        })
        .await
    }

    /// Sets the password of each account (`None`: no password); returns
    /// the accounts changed. A missing one: `NoSuchUser` (6005), or
    /// skipped if `if_exists`.
    pub async fn set_passwords(
        &self,
        changes: Vec<PasswordChange>,
        if_exists: bool,
    ) -> Result<Vec<UserAccount>, ShoalError> {
        self.users_request(UsersRequest::SetPassword { changes, if_exists })
            .await
    }

    /// Sets one account's password (see [`Cluster::set_passwords`]).
    pub async fn set_password(
        &self,
        account: AccountName,
        password: Option<StoredPassword>,
    ) -> Result<(), ShoalError> {
        self.set_passwords(vec![PasswordChange { account, password }], false)
            .await
            .map(drop)
    }

    /// Drops `accounts`; returns those dropped. A missing one:
    /// `NoSuchUser` (6005), or skipped if `if_exists`. Sessions logged in
    /// with a dropped account keep running; its next login fails.
    pub async fn drop_users(
        &self,
        accounts: Vec<AccountName>,
        if_exists: bool,
    ) -> Result<Vec<UserAccount>, ShoalError> {
        self.users_request(UsersRequest::Drop {
            accounts,
            if_exists,
        })
        .await
    }

    /// Grants ALL at `level` to `accounts` (what they hold already stays
    /// as it is); returns them as they are now. A missing account:
    /// `NoSuchUser` (6005).
    pub async fn grant(
        &self,
        accounts: Vec<AccountName>,
        level: GrantLevel,
    ) -> Result<Vec<UserAccount>, ShoalError> {
        self.users_request(UsersRequest::Grant { accounts, level })
            .await
    }

    /// Revokes ALL at `level` from `accounts`; returns them as they are
    /// now. One that does not hold it (or does not exist): `NoSuchGrant`
    /// (6006).
    pub async fn revoke(
        &self,
        accounts: Vec<AccountName>,
        level: GrantLevel,
    ) -> Result<Vec<UserAccount>, ShoalError> {
        self.users_request(UsersRequest::Revoke { accounts, level })
            .await
    }

    /// Every account (`user` = `None`), or those of one user name, with
    /// their password hashes and grants, by user then host.
    pub async fn users(&self, user: Option<&str>) -> Result<Vec<UserAccount>, ShoalError> {
        self.users_request(UsersRequest::List {
            user: user.map(str::to_string),
        })
        .await
    }
}
