//! `harmony serve`'s admin and metrics tokens must be strong
//! ([`harmony_server::tokens::check_strength`]) when the server listens beyond loopback; on a
//! loopback address a weak token is only warned about (tests and local demos).

use anyhow::{Result, bail};

/// Whether `listen` (`HOST:PORT`) is a loopback address (`127.0.0.0/8`, `::1`, `localhost`).
fn loopback(listen: &str) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses (or, on loopback, warns about) a weak admin or metrics token.
pub fn check(listen: &str, admin: &str, metrics: Option<&str>) -> Result<()> {
    for (flag, token) in [("admin-token", Some(admin)), ("metrics-token", metrics)] {
        let Some(Err(why)) = token.map(harmony_server::tokens::check_strength) else { continue };
        if !loopback(listen) {
            bail!("--{flag} (or its environment variable): {why}");
        }
        eprintln!("warning: --{flag}: {why}; accepted only because --listen {listen} is a loopback address");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_tokens_are_refused_beyond_loopback() {
        let strong = "5f0c9a3e7b21d4486e0f1a2b3c4d5e6f";
        assert!(check("0.0.0.0:8080", strong, None).is_ok());
        let e = check("0.0.0.0:8080", "a", None).unwrap_err().to_string();
        assert!(e.contains("--admin-token") && e.contains("at least 16 characters"), "{e}");
        let e = check("10.0.0.1:8080", strong, Some("aaaaaaaaaaaaaaaaaaaa")).unwrap_err().to_string();
        assert!(e.contains("--metrics-token") && e.contains("1 distinct"), "{e}");
        for local in ["127.0.0.1:8080", "localhost:80", "[::1]:8080"] {
            assert!(check(local, "tok", None).is_ok(), "{local}");
        }
    }
}
