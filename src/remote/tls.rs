//! How the native client checks an https server's certificate, and what it says when the check
//! fails.
//!
//! Trusted: the system's roots, plus the certificates of `--ca-cert` as roots (a private CA), plus
//! any server certificate that is byte for byte one of them (pinned). Pinning covers the
//! self-signed certificate of the usual one-liner (`openssl req -x509 … -addext
//! subjectAltName=IP:…`), which marks itself `CA:TRUE`: WebPKI refuses a CA certificate as a
//! server's own (`CaUsedAsEndEntity`), and curl accepts it, so a user who passed that very file
//! meant it to be trusted. A pinned certificate must still name the server and be within its
//! validity period.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::error::{Error, Result};

/// How an https server's certificate is checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tls {
    /// PEM certificates to trust besides the system's roots (a private CA, or the server's own
    /// self-signed certificate): `--ca-cert`.
    pub ca_cert: Option<std::path::PathBuf>,
    /// Accept any certificate, unverified (`--insecure`); recorded in the run record.
    pub insecure: bool,
}

/// A `--ca-cert` file may hold a bundle, not a whole system store.
const MAX_CA_CERT_BYTES: u64 = 4 << 20;

impl Tls {
    /// For `run_config.target.tls`.
    pub fn describe(&self) -> serde_json::Value {
        let mut tls = serde_json::json!({ "verify": !self.insecure, "roots": "system" });
        if let Some(path) = &self.ca_cert {
            tls["ca_cert"] = path.display().to_string().into();
            tls["roots"] = "system + ca_cert (its certificates also pinned)".into();
        }
        if self.insecure {
            tls["insecure"] = true.into();
            tls["roots"] = "none (not verified)".into();
        }
        tls
    }

    /// The `--ca-cert` certificates; none without one. An unreadable file, or one without a PEM
    /// certificate, is an error here, before anything is sent.
    pub fn extra_certificates(&self) -> Result<Vec<CertificateDer<'static>>> {
        let Some(path) = &self.ca_cert else { return Ok(Vec::new()) };
        let shown = path.display();
        let pem = crate::limits::read_file(path, MAX_CA_CERT_BYTES)
            .map_err(|e| Error::Invalid(format!("--ca-cert {shown}: {e}")))?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Invalid(format!("--ca-cert {shown}: not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(Error::Invalid(format!("--ca-cert {shown}: no PEM certificate in it")));
        }
        Ok(certs)
    }

    /// The rustls configuration for a client that checks as this says, offering HTTP/2 and
    /// HTTP/1.1 by ALPN; `None` when reqwest's own (the system's roots, or `--insecure`) is it.
    pub fn client_config(&self, provider: Arc<CryptoProvider>) -> Result<Option<rustls::ClientConfig>> {
        if self.insecure || self.ca_cert.is_none() {
            return Ok(None);
        }
        let pinned = self.extra_certificates()?;
        let failed = |e: rustls::Error| Error::Invalid(format!("cannot set up TLS with --ca-cert: {e}"));
        let roots = rustls_platform_verifier::Verifier::new_with_extra_roots(pinned.clone(), provider.clone())
            .map_err(failed)?;
        let verifier = PinnedOrRooted { roots: Arc::new(roots), pinned, provider: provider.clone() };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(failed)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Some(config))
    }
}

/// Trusts what `roots` trusts, and a server certificate equal to one of `pinned` (name and
/// validity period still checked).
#[derive(Debug)]
struct PinnedOrRooted {
    roots: Arc<dyn ServerCertVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedOrRooted {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let refused = match self.roots.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        if !self.pinned.iter().any(|pin| pin.as_ref() == end_entity.as_ref()) {
            return Err(refused);
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        match validity(end_entity.as_ref()) {
            Some((not_before, _)) if now.as_secs() < not_before => {
                Err(rustls::Error::InvalidCertificate(CertificateError::NotValidYet))
            }
            Some((_, not_after)) if now.as_secs() > not_after => {
                Err(rustls::Error::InvalidCertificate(CertificateError::Expired))
            }
            Some(_) => Ok(ServerCertVerified::assertion()),
            None => Err(rustls::Error::InvalidCertificate(CertificateError::BadEncoding)),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// What to do about a certificate the client refused, by its cause; `None` for other errors.
pub fn advice(e: &rustls::Error) -> Option<&'static str> {
    let rustls::Error::InvalidCertificate(cause) = e else {
        return matches!(e, rustls::Error::NoCertificatesPresented)
            .then_some("the server sent no certificate: is this an https server?");
    };
    Some(match cause {
        CertificateError::UnknownIssuer => {
            "no trusted CA signed the server's certificate: pass that CA, or the server's own certificate, with \
             --ca-cert FILE; --insecure skips verification"
        }
        // rustls passes WebPKI's CaUsedAsEndEntity on as `Other`, named only in its text.
        CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
            "the server presents a CA certificate as its own (a self-signed one made with CA:TRUE): pass that very \
             certificate with --ca-cert FILE to pin it; --insecure skips verification"
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "the certificate does not name the host in the URL: use a host name or IP address it names (its \
             subjectAltName); --ca-cert cannot change this"
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the certificate has expired: renew it on the server (or check this machine's clock); --insecure skips \
             verification"
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the certificate is not valid yet: check this machine's clock and the server's; --insecure skips \
             verification"
        }
        CertificateError::Revoked => "the certificate has been revoked: the server needs a new one",
        CertificateError::BadSignature | CertificateError::BadEncoding => {
            "the certificate is malformed or its signature is wrong: the server needs a new one"
        }
        _ => "the server's certificate is not trusted: pass its CA with --ca-cert FILE; --insecure skips verification",
    })
}

/// A certificate's (notBefore, notAfter) in Unix seconds, read from its DER: Certificate ::=
/// SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber, signature, issuer,
/// validity SEQUENCE { notBefore Time, notAfter Time }, … }, … }. `None` if it does not parse.
pub fn validity(der: &[u8]) -> Option<(u64, u64)> {
    let (certificate, _) = der_item(der, 0x30)?;
    let (mut tbs, _) = der_item(certificate, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = der_item(tbs, 0xa0)?.1;
    }
    for tag in [0x02, 0x30, 0x30] {
        tbs = der_item(tbs, tag)?.1; // serialNumber, signature, issuer
    }
    let (validity, _) = der_item(tbs, 0x30)?;
    let (not_before, rest) = der_time(validity)?;
    let (not_after, _) = der_time(rest)?;
    Some((not_before, not_after))
}

/// The content of the DER item at the start of `bytes` if its tag is `tag`, and what follows it.
fn der_item(bytes: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = bytes.split_first()?;
    if first != tag {
        return None;
    }
    let (&len0, mut rest) = rest.split_first()?;
    let len = if len0 < 0x80 {
        len0 as usize
    } else {
        let n = (len0 & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A UTCTime (YYMMDDHHMMSSZ, years 1950-2049) or GeneralizedTime (YYYYMMDDHHMMSSZ) as Unix seconds.
fn der_time(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (text, rest, year_digits) = match bytes.first()? {
        0x17 => der_item(bytes, 0x17).map(|(t, r)| (t, r, 2))?,
        0x18 => der_item(bytes, 0x18).map(|(t, r)| (t, r, 4))?,
        _ => return None,
    };
    let text = std::str::from_utf8(text).ok()?;
    let digits = text.strip_suffix('Z')?;
    if digits.len() != year_digits + 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = |at: usize, len: usize| digits[at..at + len].parse::<u64>().ok();
    let mut year = number(0, year_digits)?;
    if year_digits == 2 {
        year += if year < 50 { 2000 } else { 1900 };
    }
    let at = year_digits;
    let (month, day) = (number(at, 2)?, number(at + 2, 2)?);
    let (hour, minute, second) = (number(at + 4, 2)?, number(at + 6, 2)?, number(at + 8, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year.checked_sub(1970)? + 1970, month, day)?;
    Some((days * 86_400 + hour * 3600 + minute * 60 + second, rest))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (not before 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let y = if month <= 2 { year - 1 } else { year } as i64;
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = month as i64;
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    u64::try_from(era * 146_097 + day_of_era - 719_468).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2026, 12, 2), Some(20_789));
    }

    #[test]
    fn validity_reads_the_fixture_certificates() {
        let pem = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls/server.pem")).unwrap();
        let der = CertificateDer::pem_slice_iter(&pem).next().unwrap().unwrap();
        let (not_before, not_after) = validity(der.as_ref()).expect("the fixture parses");
        // Made before now, for 36,500 days (scripts/make-test-tls); openssl shows the same dates.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        assert!(not_before > 1_767_225_600 && not_before < now, "{not_before}"); // after 2026-01-01
        assert_eq!((not_after - not_before) / 86_400, 36_500);
        assert_eq!(validity(&der.as_ref()[..40]), None);
    }

    #[test]
    fn utc_and_generalized_times() {
        let utc = [&[0x17, 13][..], b"491231235959Z"].concat();
        assert_eq!(der_time(&utc).map(|t| t.0), Some(days_from_civil(2049, 12, 31).unwrap() * 86_400 + 86_399));
        let utc_1950 = [&[0x17, 13][..], b"700101000000Z"].concat();
        assert_eq!(der_time(&utc_1950).map(|t| t.0), Some(0));
        let generalized = [&[0x18, 15][..], b"20500101000001Z"].concat();
        assert_eq!(der_time(&generalized).map(|t| t.0), Some(days_from_civil(2050, 1, 1).unwrap() * 86_400 + 1));
        assert_eq!(der_time(&[&[0x17, 13][..], b"701301000000Z"].concat()), None);
    }
}
