//! The language of everything the benchmark says: reports, diagnoses, rules.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    /// The code [`FromStr`] reads: `en`, `zh`.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }
}

impl FromStr for Lang {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "en" => Ok(Lang::En),
            "zh" => Ok(Lang::Zh),
            _ => Err(Error::Invalid(format!("language {s:?}: expected en or zh"))),
        }
    }
}
