//! Who may do what: the admin token, per-collection analyst tokens, the metrics token.
//!
//! * The **admin** token (`harmony serve --admin-token`, formerly `--analyst-token`) creates
//!   collections, mints and revokes analyst tokens, lists collections and reads everything.
//! * A **per-collection analyst** token (`POST /v1/collections/{id}/tokens`, admin) reads that
//!   collection's estimates and nothing else. The server stores only its SHA-256 (a token is 256
//!   random bits, so a fast hash is enough: there is nothing to brute-force), shows the token
//!   once, and refuses it as soon as it is revoked. Rotation: mint a new one, move the readers,
//!   revoke the old one.
//! * The **metrics** token (`--metrics-token`) reads `/metrics` only; the admin token also does.
//! * A **device key** (`hdk_…`, `POST /v1/collections/{id}/enrollments`, admin) lets one device
//!   post gradients to a training collection of enrolled devices (the default), under the device
//!   id it was enrolled as (`dev_…`), one gradient per key: invented device ids cannot steer the
//!   model. Stored like analyst tokens (SHA-256 only, revocable), the device id as the token id;
//!   it grants nothing else.
//!
//! Every check runs on the request's headers before its body is read. Tokens are never logged.

use crate::error::ApiError;
use crate::store::{Store, StoreError, StoredToken};
use axum::http::{HeaderMap, StatusCode, header};
use harmony_protocol::{DeviceKey, TokenCreated, TokenInfo, to_hex};
use rand::Rng;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::RwLock;

/// The SHA-256 of a token.
pub type TokenHash = [u8; 32];

/// The prefix of per-collection analyst tokens (tells them apart in a secret scanner).
pub const TOKEN_PREFIX: &str = "hct_";

/// The prefix of device keys.
pub const DEVICE_KEY_PREFIX: &str = "hdk_";

/// The prefix of enrolled device ids (a device key's stored token id).
pub const DEVICE_ID_PREFIX: &str = "dev_";

/// Most device keys minted by one request.
pub const MAX_ENROLL: u32 = 10_000;

/// SHA-256 of `token`.
pub fn hash(token: &str) -> TokenHash {
    Sha256::digest(token.as_bytes()).into()
}

/// What a request's bearer token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Everything.
    Admin,
    /// Reading one collection (its id).
    Collection(String),
    /// `/metrics` only.
    Metrics,
}

/// The server's tokens: the admin and metrics tokens' hashes and every analyst token.
pub struct Tokens {
    admin: TokenHash,
    metrics: Option<TokenHash>,
    analysts: RwLock<HashMap<TokenHash, StoredToken>>,
    devices: RwLock<HashMap<TokenHash, StoredToken>>,
}

type TokenMap = RwLock<HashMap<TokenHash, StoredToken>>;

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "authorization", message)
}

/// The request's `Authorization: Bearer …` token.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
}

/// 32 random bytes (the secret) and 8 (the public id) from the OS CSPRNG, as hex.
fn fresh() -> (String, String) {
    let mut rng = harmony_core::sampling::secure_rng();
    let (mut secret, mut id) = ([0u8; 32], [0u8; 8]);
    rng.fill_bytes(&mut secret);
    rng.fill_bytes(&mut id);
    (to_hex(&secret), to_hex(&id))
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Tokens {
    /// The admin token, an optional metrics token and the stored analyst tokens (revoked ones
    /// are kept for listing and refused).
    pub fn new(admin: &str, metrics: Option<&str>, stored: Vec<StoredToken>) -> Self {
        let (mut analysts, mut devices) = (HashMap::new(), HashMap::new());
        for t in stored {
            let Ok(h) = t.hash.as_slice().try_into() else { continue };
            match t.token_id.starts_with(DEVICE_ID_PREFIX) {
                true => devices.insert(h, t),
                false => analysts.insert(h, t),
            };
        }
        Tokens {
            admin: hash(admin),
            metrics: metrics.map(hash),
            analysts: RwLock::new(analysts),
            devices: RwLock::new(devices),
        }
    }

    /// Takes the tokens another server sharing the store stored or revoked: adds the unknown
    /// ones and marks revoked the ones stored revoked (a token is never un-revoked or dropped).
    pub fn absorb(&self, stored: Vec<StoredToken>) {
        for t in stored {
            let Ok(h) = TokenHash::try_from(t.hash.as_slice()) else { continue };
            let mut map = self.map_of(&t.token_id).write().unwrap_or_else(|p| p.into_inner());
            match map.get_mut(&h) {
                Some(known) => known.revoked |= t.revoked,
                None => {
                    map.insert(h, t);
                }
            }
        }
    }

    /// What the request's `Authorization: Bearer …` grants; 401 when missing or unknown.
    pub fn access(&self, headers: &HeaderMap) -> Result<Access, ApiError> {
        let Some(token) = bearer(headers) else {
            return Err(unauthorized("missing token, expected `Authorization: Bearer TOKEN`"));
        };
        let h = hash(token);
        if constant_time_eq(&h, &self.admin) {
            return Ok(Access::Admin);
        }
        if self.metrics.is_some_and(|m| constant_time_eq(&h, &m)) {
            return Ok(Access::Metrics);
        }
        match self.analysts.read().unwrap_or_else(|p| p.into_inner()).get(&h) {
            Some(t) if t.revoked => Err(unauthorized("this token was revoked")),
            Some(t) => Ok(Access::Collection(t.collection.clone())),
            None => Err(unauthorized("unknown token")),
        }
    }

    /// 401 unless the admin token; 403 for another valid token.
    pub fn admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.access(headers)? {
            Access::Admin => Ok(()),
            _ => Err(forbidden("this needs the admin token")),
        }
    }

    /// The admin token or an analyst token of collection `id`; 403 for another collection's.
    pub fn reader(&self, headers: &HeaderMap, id: &str) -> Result<Access, ApiError> {
        match self.access(headers)? {
            Access::Admin => Ok(Access::Admin),
            Access::Collection(c) if c == id => Ok(Access::Collection(c)),
            Access::Collection(_) => Err(forbidden(&format!("this token does not read collection {id:?}"))),
            Access::Metrics => Err(forbidden("the metrics token reads /metrics only")),
        }
    }

    /// The admin or the metrics token.
    pub fn metrics(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.access(headers)? {
            Access::Admin | Access::Metrics => Ok(()),
            Access::Collection(_) => Err(forbidden("/metrics needs the metrics or the admin token")),
        }
    }

    /// The device id the request's device key is enrolled as in `collection`: 401 when the key
    /// is missing, unknown or revoked, 403 for another collection's key.
    pub fn device(&self, headers: &HeaderMap, collection: &str) -> Result<String, ApiError> {
        let Some(key) = bearer(headers) else {
            let msg = "this collection takes enrolled devices only: expected `Authorization: Bearer DEVICE_KEY`";
            return Err(unauthorized(msg));
        };
        match self.devices.read().unwrap_or_else(|p| p.into_inner()).get(&hash(key)) {
            Some(t) if t.revoked => Err(unauthorized("this device key was revoked")),
            Some(t) if t.collection == collection => Ok(t.token_id.clone()),
            Some(_) => Err(forbidden(&format!("this device key is not enrolled in collection {collection:?}"))),
            None => Err(unauthorized("unknown device key")),
        }
    }

    /// Mints `count` device keys of `collection`, stores their hashes (all or none), then
    /// accepts them.
    pub fn enroll(
        &self,
        store: &dyn Store,
        collection: &str,
        count: u32,
        label: &str,
    ) -> Result<Vec<DeviceKey>, StoreError> {
        let created = now();
        let (mut rows, mut keys) = (Vec::with_capacity(count as usize), Vec::with_capacity(count as usize));
        for _ in 0..count {
            let (secret, id) = fresh();
            let key =
                DeviceKey { device_id: format!("{DEVICE_ID_PREFIX}{id}"), key: format!("{DEVICE_KEY_PREFIX}{secret}") };
            rows.push(StoredToken {
                token_id: key.device_id.clone(),
                collection: collection.to_string(),
                hash: hash(&key.key).to_vec(),
                label: label.to_string(),
                created,
                revoked: false,
            });
            keys.push(key);
        }
        store.insert_tokens(&rows)?;
        let mut map = self.devices.write().unwrap_or_else(|p| p.into_inner());
        map.extend(rows.into_iter().zip(&keys).map(|(t, k)| (hash(&k.key), t)));
        Ok(keys)
    }

    /// Mints an analyst token of `collection`, stores its hash, then serves it.
    pub fn mint(&self, store: &dyn Store, collection: &str, label: &str) -> Result<TokenCreated, StoreError> {
        let (secret, id) = fresh();
        let token = format!("{TOKEN_PREFIX}{secret}");
        let stored = StoredToken {
            token_id: id,
            collection: collection.to_string(),
            hash: hash(&token).to_vec(),
            label: label.to_string(),
            created: now(),
            revoked: false,
        };
        store.insert_token(&stored)?;
        let out = TokenCreated {
            collection: collection.into(),
            token_id: stored.token_id.clone(),
            token,
            label: label.into(),
        };
        self.analysts.write().unwrap_or_else(|p| p.into_inner()).insert(hash(&out.token), stored);
        Ok(out)
    }

    /// The map holding `token_id`: device keys' ids start with [`DEVICE_ID_PREFIX`].
    fn map_of(&self, token_id: &str) -> &TokenMap {
        match token_id.starts_with(DEVICE_ID_PREFIX) {
            true => &self.devices,
            false => &self.analysts,
        }
    }

    /// Revokes analyst token or device key `token_id` of `collection` (stored first); whether
    /// it existed.
    pub fn revoke(&self, store: &dyn Store, collection: &str, token_id: &str) -> Result<bool, StoreError> {
        let map = self.map_of(token_id);
        let known = {
            let map = map.read().unwrap_or_else(|p| p.into_inner());
            map.values().any(|t| t.collection == collection && t.token_id == token_id)
        };
        if !known || !store.revoke_token(token_id)? {
            return Ok(false);
        }
        let mut map = map.write().unwrap_or_else(|p| p.into_inner());
        map.values_mut().filter(|t| t.token_id == token_id).for_each(|t| t.revoked = true);
        Ok(true)
    }

    /// The analyst tokens of `collection`, oldest first (by second, then id).
    pub fn list(&self, collection: &str) -> Vec<TokenInfo> {
        Self::list_of(&self.analysts, collection)
    }

    /// The enrolled devices of `collection` (their ids as token ids), oldest first.
    pub fn devices(&self, collection: &str) -> Vec<TokenInfo> {
        Self::list_of(&self.devices, collection)
    }

    fn list_of(map: &TokenMap, collection: &str) -> Vec<TokenInfo> {
        let map = map.read().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<TokenInfo> = map
            .values()
            .filter(|t| t.collection == collection)
            .map(|t| TokenInfo {
                token_id: t.token_id.clone(),
                label: t.label.clone(),
                created: t.created,
                revoked: t.revoked,
            })
            .collect();
        out.sort_by(|a, b| (a.created, &a.token_id).cmp(&(b.created, &b.token_id)));
        out
    }
}

fn forbidden(message: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "authorization", message)
}

/// Fewest characters of an admin or metrics token.
pub const MIN_TOKEN_CHARS: usize = 16;
/// Fewest distinct characters of an admin or metrics token.
pub const MIN_TOKEN_DISTINCT: usize = 8;

/// Whether `token` is strong enough to guard a server: at least [`MIN_TOKEN_CHARS`] characters,
/// [`MIN_TOKEN_DISTINCT`] of them distinct (a random 128-bit hex token, as `harmony serve`
/// generates, has 32 and about 15). The error says what was expected, never the token.
pub fn check_strength(token: &str) -> Result<(), String> {
    let n = token.chars().count();
    let distinct = token.chars().collect::<std::collections::HashSet<_>>().len();
    if n < MIN_TOKEN_CHARS || distinct < MIN_TOKEN_DISTINCT {
        return Err(format!(
            "a token of {n} characters ({distinct} distinct), expected at least {MIN_TOKEN_CHARS} characters with \
             {MIN_TOKEN_DISTINCT} distinct (e.g. 32 random hex digits: `openssl rand -hex 16`)"
        ));
    }
    Ok(())
}

/// Checks a token label: at most 64 of `[A-Za-z0-9 _.@-]`.
pub fn check_label(label: &str) -> Result<(), ApiError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || " _.@-".contains(c);
    if label.len() > 64 || !label.chars().all(ok) {
        return Err(ApiError::bad("label", format!("{label:?} is not 0..=64 of [A-Za-z0-9 _.@-]")));
    }
    Ok(())
}

/// Equality of two hashes in time independent of where they differ.
fn constant_time_eq(a: &TokenHash, b: &TokenHash) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        h
    }

    fn stored(id: &str, collection: &str, token: &str, revoked: bool) -> StoredToken {
        StoredToken {
            token_id: id.into(),
            collection: collection.into(),
            hash: hash(token).to_vec(),
            label: String::new(),
            created: 1,
            revoked,
        }
    }

    #[test]
    fn each_token_grants_its_own_scope() {
        let t =
            Tokens::new("adm", Some("met"), vec![stored("a", "c1", "hct_x", false), stored("b", "c1", "hct_y", true)]);
        assert_eq!(t.access(&bearer("adm")).unwrap(), Access::Admin);
        assert_eq!(t.access(&bearer("met")).unwrap(), Access::Metrics);
        assert_eq!(t.reader(&bearer("hct_x"), "c1").unwrap(), Access::Collection("c1".into()));
        assert_eq!(t.reader(&bearer("hct_x"), "c2").unwrap_err().status, StatusCode::FORBIDDEN);
        assert_eq!(t.admin(&bearer("hct_x")).unwrap_err().status, StatusCode::FORBIDDEN);
        assert_eq!(t.metrics(&bearer("hct_x")).unwrap_err().status, StatusCode::FORBIDDEN);
        assert_eq!(t.reader(&bearer("met"), "c1").unwrap_err().status, StatusCode::FORBIDDEN);
        assert!(t.metrics(&bearer("met")).is_ok() && t.metrics(&bearer("adm")).is_ok());
        let revoked = t.access(&bearer("hct_y")).unwrap_err();
        assert_eq!(revoked.status, StatusCode::UNAUTHORIZED);
        assert!(revoked.message.contains("revoked"), "{}", revoked.message);
        assert_eq!(t.access(&bearer("nope")).unwrap_err().status, StatusCode::UNAUTHORIZED);
        assert_eq!(t.access(&HeaderMap::new()).unwrap_err().status, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn labels_are_checked() {
        assert!(check_label("dashboard for ana@example.org").is_ok());
        assert!(check_label("<script>").is_err());
        assert!(check_label(&"x".repeat(65)).is_err());
    }
}
