//! Several servers behind one client (replicas on one PostgreSQL database): a request goes to
//! one of them and, when that one does not answer (a transport error, or a 5xx after the
//! client's own short retries), to the next, until one answers or [`DEADLINE`] passes. A
//! refusal (4xx) is final. Report batches are safe to resend anywhere: report ids are the
//! store's primary key, so a batch whose first answer was lost is acknowledged as duplicates.

use anyhow::{Result, anyhow, bail};
use harmony_client::{Client, ClientError, RetryPolicy};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a request keeps going round the servers before it gives up.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The servers of a comma-separated `--server` list.
pub struct Replicas {
    clients: Vec<Client>,
    urls: Vec<String>,
    /// Requests that moved on to another server.
    failovers: AtomicU64,
}

impl Replicas {
    /// One client per URL of `list` (comma-separated), through `make`. With several, each
    /// client's own retries are short: the next server is tried instead.
    pub fn new(list: &str, make: impl Fn(&str) -> Result<Client>) -> Result<Self> {
        let urls: Vec<String> = list.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect();
        if urls.is_empty() {
            bail!("--server is {list:?}, expected a URL or several separated by commas");
        }
        let short = RetryPolicy { attempts: 2, base: Duration::from_millis(50), max: Duration::from_millis(200) };
        let clients = urls
            .iter()
            .map(|u| Ok(if urls.len() > 1 { make(u)?.with_retry(short) } else { make(u)? }))
            .collect::<Result<_>>()?;
        Ok(Replicas { clients, urls, failovers: AtomicU64::new(0) })
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// The first server's client (for what must not be sent twice, e.g. a create).
    pub fn first(&self) -> &Client {
        &self.clients[0]
    }

    /// The clients, with their URLs.
    pub fn each(&self) -> impl Iterator<Item = (&str, &Client)> {
        self.urls.iter().map(String::as_str).zip(&self.clients)
    }

    /// Requests that moved on to another server so far.
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    /// `f` on the servers from number `start` on, in turn, until one answers (see the module
    /// docs); waits a little more after each full round.
    pub fn call<T>(&self, start: usize, f: impl Fn(&Client) -> harmony_client::Result<T>) -> Result<T> {
        let t0 = Instant::now();
        let n = self.clients.len();
        for attempt in 0usize.. {
            match f(&self.clients[(start + attempt) % n]) {
                Ok(v) => return Ok(v),
                Err(e @ ClientError::Rejected { .. }) => return Err(e.into()),
                Err(e) if n == 1 || t0.elapsed() > DEADLINE => {
                    return Err(anyhow!(e).context(format!("no server of {} answered", self.urls.join(","))));
                }
                Err(_) => {
                    self.failovers.fetch_add(1, Ordering::Relaxed);
                    if (attempt + 1) % n == 0 {
                        std::thread::sleep(Duration::from_millis(100 * ((attempt + 1) / n).min(10) as u64));
                    }
                }
            }
        }
        unreachable!("the loop returns")
    }
}
