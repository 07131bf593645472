//! `harmony collection list` and `harmony collection token create|list|revoke`: the server's
//! per-collection analyst tokens (docs/SERVER.md, "Tokens").

use crate::output::Format;
use anyhow::Result;
use clap::{Args, Subcommand};
use harmony_client::Client;

/// The server and the token of a request.
#[derive(Args, Debug)]
pub struct ServerToken {
    /// Server URL, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub server: String,
    #[command(flatten)]
    pub ca: super::CaCert,
    #[command(flatten)]
    pub token: super::Token,
}

impl ServerToken {
    pub(super) fn client(&self) -> Result<Client> {
        Ok(self.ca.client(&self.server)?.with_token(&self.token.required()?))
    }
}

/// `harmony collection list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub at: ServerToken,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// `harmony collection token …`.
#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Mint an analyst token that reads one collection's estimates; prints it once on stdout
    /// (the server keeps only its SHA-256).
    Create {
        #[command(flatten)]
        at: ServerToken,
        /// Collection id.
        #[arg(long)]
        collection: String,
        /// Who or what the token is for (0..=64 of `[A-Za-z0-9 _.@-]`).
        #[arg(long, default_value = "")]
        label: String,
        /// Output format (json: the id, label and token).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// List a collection's analyst tokens (ids, labels, creation times; never the tokens).
    List {
        #[command(flatten)]
        at: ServerToken,
        /// Collection id.
        #[arg(long)]
        collection: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Enroll devices in a train or adaptive-rounds collection (enrollment is their default,
    /// `collection create --no-enrollment` opts out): writes a CSV of
    /// `device_id,key` (mode 0600; the keys are shown this once) for `harmony submit
    /// --device-keys`. Revoke a device with `token revoke --token-id DEVICE_ID`.
    Enroll {
        #[command(flatten)]
        at: ServerToken,
        /// Collection id.
        #[arg(long)]
        collection: String,
        /// How many devices (1..=10000).
        #[arg(long)]
        count: u32,
        /// Who the keys are for (0..=64 of `[A-Za-z0-9 _.@-]`).
        #[arg(long, default_value = "")]
        label: String,
        /// The CSV file to write (refused if it exists).
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// List a collection's enrolled devices (ids, labels, states; never the keys).
    Devices {
        #[command(flatten)]
        at: ServerToken,
        /// Collection id.
        #[arg(long)]
        collection: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Revoke an analyst token or an enrolled device's key (`dev_…`): refused from the next
    /// request on. Rotation: create a new token, move its readers, revoke the old one.
    Revoke {
        #[command(flatten)]
        at: ServerToken,
        /// Collection id.
        #[arg(long)]
        collection: String,
        /// The token's id (from `create` or `list`).
        #[arg(long)]
        token_id: String,
    },
}

/// Runs `harmony collection token …`.
pub fn run(cmd: TokenCommand) -> Result<()> {
    match cmd {
        TokenCommand::Create { at, collection, label, format } => {
            let t = at.client()?.create_token(&collection, &label)?;
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&t)?),
                Format::Table => {
                    eprintln!("token {} of collection {} (shown once; keep it secret):", t.token_id, t.collection);
                    println!("{}", t.token);
                }
            }
        }
        TokenCommand::Enroll { at, collection, count, label, out } => {
            let enrolled = at.client()?.enroll(&collection, count, &label)?;
            let mut text = String::from("device_id,key\n");
            for d in &enrolled.devices {
                text.push_str(&format!("{},{}\n", d.device_id, d.key));
            }
            write_secret(&out, &text)?;
            eprintln!(
                "enrolled {} devices in collection {collection}: keys in {}",
                enrolled.devices.len(),
                out.display()
            );
        }
        TokenCommand::Devices { at, collection, format } => {
            print_tokens(&at.client()?.enrollments(&collection)?, format)?
        }
        TokenCommand::List { at, collection, format } => print_tokens(&at.client()?.tokens(&collection)?, format)?,
        TokenCommand::Revoke { at, collection, token_id } => {
            at.client()?.revoke_token(&collection, &token_id)?;
            eprintln!("revoked token {token_id} of collection {collection}");
        }
    }
    Ok(())
}

/// Prints tokens (or enrolled devices) as a table or JSON.
fn print_tokens(list: &[harmony_protocol::TokenInfo], format: Format) -> Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(list)?),
        Format::Table => {
            println!("{:<20}  {:<8}  {:<20}  label", "token_id", "state", "created (UTC)");
            for t in list {
                let state = if t.revoked { "revoked" } else { "active" };
                let created = harmony_data::temporal::format_datetime(t.created as f64);
                println!("{:<20}  {state:<8}  {created:<20}  {}", t.token_id, t.label);
            }
        }
    }
    Ok(())
}

/// Writes `text` to a new file readable by its owner only.
fn write_secret(path: &std::path::Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f =
        o.open(path).map_err(|e| anyhow::anyhow!("cannot create {}: {e} (it must not exist)", path.display()))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// Runs `harmony collection list`.
pub fn list_collections(a: &ListArgs) -> Result<()> {
    let list = a.at.client()?.collections()?;
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&list)?),
        Format::Table => {
            println!("{:<24}  {:<14}  {:>8}  {:>10}  {:<20}  name", "id", "task", "epsilon", "reports", "created");
            for c in &list {
                // Server-provided text: escaped, so no control character reaches the terminal.
                let name = c.name.as_deref().map(super::printable::escape).unwrap_or_default();
                let created = c.created.as_deref().map(super::printable::escape).unwrap_or_else(|| "-".into());
                println!("{:<24}  {:<14}  {:>8}  {:>10}  {created:<20}  {name}", c.id, c.task, c.epsilon, c.reports);
            }
        }
    }
    Ok(())
}
