//! Where a run's requests go, as the run request names it (`bench::request`, on top): the engine
//! in this process, or an OpenAI-compatible server — its API root, the model name to send and the
//! API. What a server needs beyond that (its key, TLS, timeouts, the scrape URLs) is the edge's:
//! a key is never part of a request, so a saved request can be shown and run again.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::base::rules::{Rule, UrlFault};
use crate::error::{Error, Result};

/// The target a run request names: where its requests go. Not itself something the benchmark
/// loads (that is a `run::target::Target`: the launcher's `EngineTarget`, a server client's
/// `ServerTarget`, the planner's `FleetTarget`), only its name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamedTarget {
    /// The engine in this process, on the model the edge loaded (`--model`, `--synthetic`, the
    /// embedded default; the page's model card).
    #[default]
    Engine,
    /// An OpenAI-compatible server (`--endpoint`; the page's target card).
    Server(ServerAddress),
}

impl NamedTarget {
    pub fn server(&self) -> Option<&ServerAddress> {
        match self {
            NamedTarget::Server(s) => Some(s),
            NamedTarget::Engine => None,
        }
    }
}

/// A server as a run request names it: its API root, the model name to send and the API (the
/// client adds the key, TLS and timeouts: `remote::Endpoint`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAddress {
    pub base_url: BaseUrl,
    /// The `model` of every request; `None`: the only one `GET /v1/models` lists.
    pub served_model: Option<String>,
    pub api: Api,
}

/// Which endpoint a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `/v1/completions`: a prompt of token ids or text.
    Completions,
    /// `/v1/chat/completions`: one user message of text.
    Chat,
}

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat/completions",
        }
    }
}

impl FromStr for Api {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "completions" => Ok(Api::Completions),
            "chat" => Ok(Api::Chat),
            _ => Err(Error::Invalid(format!("API {s:?}: expected completions or chat"))),
        }
    }
}

/// A server's API root, such as `http://127.0.0.1:8000/v1`, checked once: http(s), a host, and
/// nothing that could carry a secret or change the path (user info, query, fragment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BaseUrl(String);

impl BaseUrl {
    pub fn parse(text: &str) -> Result<Self> {
        BaseUrl::read(text).map_err(|rule| Error::Invalid(rule.text(Lang::En)))
    }

    /// [`BaseUrl::parse`], with what is wrong as a rule (worded in each language).
    pub fn read(text: &str) -> std::result::Result<Self, Rule> {
        let invalid = |fault| Rule::Endpoint { text: text.to_string(), fault };
        let rest =
            text.strip_prefix("http://").or_else(|| text.strip_prefix("https://")).ok_or(invalid(UrlFault::NotHttp))?;
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(UrlFault::Spaces));
        }
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            return Err(invalid(UrlFault::UserInfo));
        }
        if rest.contains(['?', '#']) {
            return Err(invalid(UrlFault::QueryOrFragment));
        }
        let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
        if host.is_empty() {
            return Err(invalid(UrlFault::NoHost));
        }
        Ok(BaseUrl(text.trim_end_matches('/').to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `path` under the root: `url("models")` is `…/v1/models`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.0)
    }
}

impl std::fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
