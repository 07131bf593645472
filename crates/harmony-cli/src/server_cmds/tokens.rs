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
    /// The admin token (else `HARMONY_ANALYST_TOKEN`); `collection list` also takes an analyst token.
    #[arg(long, env = "HARMONY_ANALYST_TOKEN", hide_env_values = true)]
    pub token: String,
}

impl ServerToken {
    fn client(&self) -> Result<Client> {
        Ok(self.ca.client(&self.server)?.with_token(&self.token))
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
    /// Revoke an analyst token: refused from the next request on. Rotation: create a new
    /// token, move its readers, revoke the old one.
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
        TokenCommand::List { at, collection, format } => {
            let list = at.client()?.tokens(&collection)?;
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&list)?),
                Format::Table => {
                    println!("{:<16}  {:<8}  {:<12}  label", "token_id", "state", "created");
                    for t in &list {
                        let state = if t.revoked { "revoked" } else { "active" };
                        println!("{:<16}  {state:<8}  {:<12}  {}", t.token_id, t.created, t.label);
                    }
                }
            }
        }
        TokenCommand::Revoke { at, collection, token_id } => {
            at.client()?.revoke_token(&collection, &token_id)?;
            eprintln!("revoked token {token_id} of collection {collection}");
        }
    }
    Ok(())
}

/// Runs `harmony collection list`.
pub fn list_collections(a: &ListArgs) -> Result<()> {
    let list = a.at.client()?.collections()?;
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&list)?),
        Format::Table => {
            println!("{:<24}  {:<14}  {:>8}  {:>10}", "id", "task", "epsilon", "reports");
            for c in &list {
                println!("{:<24}  {:<14}  {:>8}  {:>10}", c.id, c.task, c.epsilon, c.reports);
            }
        }
    }
    Ok(())
}
