//! A store's error, said in one line a person can read: the store's own code and what to do
//! about it, instead of the client's layers of request detail, a URL with its query and the
//! server's XML. The code stays in the line (`(NoSuchBucket)`), so it can be searched for.
//!
//! | The store says | fastwrite says |
//! |---|---|
//! | `NoSuchBucket` | bucket 'B' does not exist (NoSuchBucket) |
//! | `InvalidBucketName` | 'B' is not a valid bucket name (InvalidBucketName) |
//! | `InvalidAccessKeyId` | the access key was refused (InvalidAccessKeyId): check AWS_ACCESS_KEY_ID or the profile |
//! | `SignatureDoesNotMatch` | the secret key was refused (SignatureDoesNotMatch): check AWS_SECRET_ACCESS_KEY or the profile |
//! | `ExpiredToken`, `TokenRefreshRequired` | the session's credentials have expired (ExpiredToken): get new ones |
//! | `AccessDenied` | access denied (AccessDenied): these credentials may not do this here |
//! | `RequestTimeTooSkewed` | this machine's clock is too far from the store's (RequestTimeTooSkewed): set it right |
//! | `SlowDown` | the store kept asking to slow down (SlowDown) |
//! | `NoSuchKey` | no such object (NoSuchKey) |
//! | `ContainerNotFound` (Azure) | the container does not exist (ContainerNotFound) |
//! | `InvalidResourceName`, `OutOfRangeInput` (Azure) | the container's or blob's name is not valid (InvalidResourceName) |
//! | `AuthenticationFailed` (Azure) | the account key or SAS token was refused (AuthenticationFailed): check AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or the connection string |
//! | `AuthorizationFailure` (Azure) | the request was not authorized (AuthorizationFailure): check the account key, the SAS token's permissions and the account's network rules |
//! | `AuthorizationPermissionMismatch` (Azure) | access denied (AuthorizationPermissionMismatch): these credentials may not do this here |
//! | `ServerBusy` (Azure) | the store kept asking to slow down (ServerBusy) |
//! | `BlobNotFound` (Azure) | no such object (BlobNotFound) |
//! | `AuthenticationRequired` (GCS) | no credentials were accepted (AuthenticationRequired): set GOOGLE_APPLICATION_CREDENTIALS or run 'gcloud auth application-default login' |
//! | another code | the store's message (Code) |
//! | no connection | cannot connect to http://HOST:PORT (connection refused) after N tries in T s |
//! | a name not found | cannot find the host HOST (DNS) |
//! | a connection cut | the connection to http://HOST:PORT was cut (reset) after N tries in T s |
//! | no answer in time | no answer from http://HOST:PORT in time after N tries in T s |
//! | a certificate not trusted | the TLS certificate of https://HOST is not trusted: it is signed by a CA this machine does not trust (UnknownIssuer): give that CA's certificate with AWS_CA_BUNDLE (S3), REQUESTS_CA_BUNDLE or SSL_CERT_FILE (likewise a certificate for another name, expired, not valid yet) |
//! | another certificate failure | the TLS certificate of https://HOST was refused |
//!
//! Anything else is the client's text, with URLs cut to their host and what repeats said once.

/// `text` (a store error and its causes, as `explain` joins them) in one line.
pub(crate) fn readable(text: &str) -> String {
    let text = text.replace("\\n", "\n");
    if let Some(code) = field(&text, "Code") {
        return by_code(&text, &code);
    }
    if let Some((code, message)) = json_error(&text) {
        let xml = format!("<Code>{code}</Code><Message>{message}</Message>");
        return by_code(&xml, &code);
    }
    let endpoint = endpoint(&text);
    let tries = tries(&text);
    // The client's own settings, which it names in every error after retries
    // ("max_retries: 10, retry_timeout: 180s"), say nothing of what happened.
    let lower = text.to_ascii_lowercase();
    let lower = match lower.find("max_retries:") {
        Some(at) => {
            let end = lower[at..].find(" - ").map_or(lower.len(), |end| at + end);
            format!("{}{}", &lower[..at], &lower[end..])
        }
        None => lower,
    };
    if lower.contains("token request") && lower.contains("169.254.169.254") {
        return "no Google Cloud credentials were found (the metadata server of a Google Cloud machine did not answer): set GOOGLE_APPLICATION_CREDENTIALS or run 'gcloud auth application-default login'".to_string();
    }
    if lower.contains("connection refused") {
        return format!("cannot connect to {endpoint} (connection refused){tries}");
    }
    if [
        "connection reset",
        "connection closed",
        "broken pipe",
        "incompletemessage",
    ]
    .iter()
    .any(|cut| lower.contains(cut))
    {
        return format!("the connection to {endpoint} was cut (reset){tries}");
    }
    if lower.contains("dns error") || lower.contains("failed to lookup address") {
        let host = endpoint
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(':').next())
            .unwrap_or(&endpoint);
        return format!("cannot find the host {host} (DNS){tries}");
    }
    if lower.contains("timed out") || lower.contains("timeout") {
        return format!("no answer from {endpoint} in time{tries}");
    }
    if let Some(problem) = certificate_problem(&text) {
        return format!("the TLS certificate of {endpoint} is not trusted: {problem}");
    }
    if lower.contains("certificate") {
        return format!("the TLS certificate of {endpoint} was refused{tries}");
    }
    plain(&text)
}

/// What the TLS client found wrong with a server's certificate (rustls's words, "invalid peer
/// certificate: UnknownIssuer"), said with what to do; `None` for any other failure.
pub(crate) fn certificate_problem(text: &str) -> Option<String> {
    let at = text.find("invalid peer certificate: ")? + "invalid peer certificate: ".len();
    let word: String = text[at..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    Some(match word.as_str() {
        "UnknownIssuer" => "it is signed by a CA this machine does not trust (UnknownIssuer): give that CA's certificate with AWS_CA_BUNDLE (S3), REQUESTS_CA_BUNDLE or SSL_CERT_FILE".to_string(),
        w if w.starts_with("NotValidForName") => {
            "it was made for another host name (NotValidForName): use the name it was made for".to_string()
        }
        w if w.starts_with("Expired") => "it has expired (Expired)".to_string(),
        w if w.starts_with("NotValidYet") => {
            "it is not valid yet (NotValidYet): is this machine's clock right?".to_string()
        }
        w => format!("{w} (the TLS client's word)"),
    })
}

/// Whether `said` (a line of `readable`'s) says the bucket itself is missing, which a store
/// answers with the 404 of a missing object.
pub(crate) fn says_bucket_missing(said: &str) -> bool {
    ["(NoSuchBucket)", "(ContainerNotFound)"]
        .iter()
        .any(|code| said.contains(code))
}

/// What the store's code means.
fn by_code(text: &str, code: &str) -> String {
    let bucket = field(text, "BucketName");
    let named = |what: &str| match &bucket {
        Some(bucket) => format!("{what} '{bucket}'"),
        None => format!("the {what}"),
    };
    match code {
        "NoSuchBucket" => format!("{} does not exist (NoSuchBucket)", named("bucket")),
        "InvalidBucketName" => match &bucket {
            Some(bucket) => format!("'{bucket}' is not a valid bucket name (InvalidBucketName)"),
            None => "the bucket's name is not valid (InvalidBucketName)".to_string(),
        },
        "InvalidAccessKeyId" => "the access key was refused (InvalidAccessKeyId): check AWS_ACCESS_KEY_ID or the profile".to_string(),
        "SignatureDoesNotMatch" => "the secret key was refused (SignatureDoesNotMatch): check AWS_SECRET_ACCESS_KEY or the profile".to_string(),
        "ExpiredToken" | "TokenRefreshRequired" => {
            format!("the session's credentials have expired ({code}): get new ones")
        }
        "AccessDenied" => {
            "access denied (AccessDenied): these credentials may not do this here".to_string()
        }
        "RequestTimeTooSkewed" => "this machine's clock is too far from the store's (RequestTimeTooSkewed): set it right".to_string(),
        "SlowDown" | "ServerBusy" => {
            format!("the store kept asking to slow down ({code}){}", tries(text))
        }
        "NoSuchKey" | "BlobNotFound" => format!("no such object ({code})"),
        "ContainerNotFound" => "the container does not exist (ContainerNotFound)".to_string(),
        "InvalidResourceName" | "OutOfRangeInput" => {
            format!("the container's or blob's name is not valid ({code})")
        }
        "AuthenticationFailed" => format!(
            "the account key or SAS token was refused ({code}): check AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or the connection string"
        ),
        "AuthorizationFailure" => format!(
            "the request was not authorized ({code}): check the account key, the SAS token's permissions and the account's network rules"
        ),
        "AuthenticationRequired" => format!(
            "no credentials were accepted ({code}): set GOOGLE_APPLICATION_CREDENTIALS or run 'gcloud auth application-default login'"
        ),
        "AuthorizationPermissionMismatch" => {
            format!("access denied ({code}): these credentials may not do this here")
        }
        _ => match field(text, "Message") {
            // Azure's message goes on with a line of its request's id and time.
            Some(message) => {
                let message = message.lines().next().unwrap_or_default();
                format!("{} ({code})", message.trim_end_matches('.'))
            }
            None => format!("the store refused the request ({code})"),
        },
    }
}

/// The code and message of a JSON error (`{"error": {"code": 404, "message": "...", "errors":
/// [{"reason": "notFound"}]}}`, Google Cloud Storage's JSON API), the code as its XML API says
/// it (`NoSuchBucket`, `NoSuchKey`, `AccessDenied`...).
fn json_error(text: &str) -> Option<(String, String)> {
    let error = &text[text.find("{\"error\"")?..];
    let message = json_string(error, "message").unwrap_or_default();
    let reason = json_string(error, "reason").unwrap_or_default();
    let status = error
        .find("\"code\":")
        .map(|at| &error[at + 7..])
        .and_then(|rest| rest.trim_start().get(..3))
        .and_then(|digits| digits.parse::<u16>().ok())
        .unwrap_or(0);
    let lower = message.to_ascii_lowercase();
    let code = match status {
        404 if lower.contains("bucket") => "NoSuchBucket",
        404 => "NoSuchKey",
        401 => "AuthenticationRequired",
        403 => "AccessDenied",
        412 => "PreconditionFailed",
        429 => "SlowDown",
        _ if !reason.is_empty() => &reason,
        _ => return Some((format!("HTTP {status}"), message)),
    };
    Some((code.to_string(), message))
}

/// The first string named `name` in a JSON text (`"name": "value"`), its escapes undone.
fn json_string(json: &str, name: &str) -> Option<String> {
    let key = format!("\"{name}\"");
    let after = json[json.find(&key)? + key.len()..].trim_start();
    let mut chars = after
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?
        .chars();
    let mut value = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push(' '),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// The text of the first `<name>...</name>` in `text`, unescaped.
fn field(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&format!("</{name}>"))?;
    let value = text[start..end].trim();
    (!value.is_empty()).then(|| {
        value
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    })
}

/// The scheme, host and port of the first URL in `text` (`the store` if none).
fn endpoint(text: &str) -> String {
    let Some(start) = text.find("http://").or_else(|| text.find("https://")) else {
        return "the store".to_string();
    };
    let url = &text[start..];
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let end = url[after_scheme..]
        .find(|c: char| c == '/' || c == '?' || c.is_whitespace())
        .map_or(url.len(), |at| after_scheme + at);
    url[..end].to_string()
}

/// " after N tries in T s", from the client's "in T, after N retries" (empty if it did not
/// retry).
fn tries(text: &str) -> String {
    let Some(at) = text.find(" retries") else {
        return String::new();
    };
    let before = &text[..at];
    let Some(retries) = before
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse::<u32>().ok())
    else {
        return String::new();
    };
    let took = before
        .rfind(" in ")
        .map(|at| &before[at + 4..])
        .and_then(|rest| rest.split([',', ' ']).next())
        .and_then(seconds);
    match took {
        Some(secs) => format!(" after {} tries in {secs:.1} s", retries + 1),
        None => format!(" after {} tries", retries + 1),
    }
}

/// A duration as the client prints it (`2.11s`, `850ms`, `3.1µs`), in seconds.
fn seconds(text: &str) -> Option<f64> {
    let unit_at = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let value: f64 = text[..unit_at].parse().ok()?;
    match &text[unit_at..] {
        "s" => Some(value),
        "ms" => Some(value / 1e3),
        "µs" | "us" => Some(value / 1e6),
        "ns" => Some(value / 1e9),
        _ => None,
    }
}

/// The client's text with every URL cut to its host (no path, no query) and each phrase said
/// once (the client repeats its own as it wraps errors).
fn plain(text: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        if word.starts_with("http://") || word.starts_with("https://") {
            words.push(endpoint(word));
        } else {
            words.push(word.to_string());
        }
    }
    let mut out = words.join(" ");
    // "X: X" and "X: Y: X: Y" said once.
    let mut parts: Vec<&str> = Vec::new();
    let owned = out.clone();
    for part in owned.split(": ") {
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    out = parts.join(": ");
    out.trim_end_matches([':', ' ']).to_string()
}

/// The store's error in a line a person can read (`said.rs`): the store's code and what to do,
/// without the client's layers of request detail, URLs or XML.
pub(crate) fn explain(e: &object_store::Error) -> String {
    readable(&chain(e))
}

/// An error and its causes in one text, each cause that adds something after a `: `.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_not_trusted_is_said_with_what_to_do() {
        let text = "Generic S3 error: Error performing list request: Error performing GET https://127.0.0.1:9000/b?list-type=2 in 2ms - HTTP error: error sending request: client error (Connect): invalid peer certificate: UnknownIssuer";
        assert_eq!(
            readable(text),
            "the TLS certificate of https://127.0.0.1:9000 is not trusted: it is signed by a CA this machine does not trust (UnknownIssuer): give that CA's certificate with AWS_CA_BUNDLE (S3), REQUESTS_CA_BUNDLE or SSL_CERT_FILE"
        );
        let other_name = text.replace("UnknownIssuer", "NotValidForNameContext { expected: .. }");
        assert!(readable(&other_name).contains("made for another host name"));
        assert_eq!(certificate_problem("connection refused"), None);
    }

    const NO_BUCKET: &str = r#"Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:7071/nosuch?list-type=2&prefix=p%2F in 3.129237ms - Server returned non-2xx status code: 404 Not Found: <?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist.</Message><BucketName>nosuch</BucketName><RequestId>SFNKPE18VL5PKPY4</RequestId></Error>"#;

    #[test]
    fn a_store_code_is_said_with_what_to_do() {
        assert_eq!(
            readable(NO_BUCKET),
            "bucket 'nosuch' does not exist (NoSuchBucket)"
        );
        let secret = NO_BUCKET
            .replace("NoSuchBucket", "SignatureDoesNotMatch")
            .replace("<BucketName>nosuch</BucketName>", "");
        assert!(readable(&secret).starts_with("the secret key was refused"));
        let other = "HTTP 400: <Error><Code>InvalidArgument</Code><Message>Part number must be an integer.</Message></Error>";
        assert_eq!(
            readable(other),
            "Part number must be an integer (InvalidArgument)"
        );
        // Azure's message has its request's id and time on lines of their own.
        let azure = r#"HTTP 409: <?xml version="1.0" encoding="utf-8"?><Error><Code>LeaseIdMissing</Code><Message>There is currently a lease on the blob and no lease ID was specified in the request.\nRequestId:55e23acf\nTime:2026-11-28T12:08:26.832Z</Message></Error>"#;
        assert_eq!(
            readable(azure),
            "There is currently a lease on the blob and no lease ID was specified in the request (LeaseIdMissing)"
        );
        let missing = azure.replace("LeaseIdMissing", "ContainerNotFound");
        assert_eq!(
            readable(&missing),
            "the container does not exist (ContainerNotFound)"
        );
    }

    #[test]
    fn a_json_error_is_said_with_the_xml_apis_code() {
        let missing = r#"HTTP 404: {"error":{"code":404,"message":"The specified bucket does not exist.","errors":[{"reason":"notFound"}]}}"#;
        assert_eq!(
            readable(missing),
            "the bucket does not exist (NoSuchBucket)"
        );
        let object = r#"HTTP 404: {"error":{"code":404,"message":"No such object: bk/a"}}"#;
        assert_eq!(readable(object), "no such object (NoSuchKey)");
        let upload = r#"Generic GCS error: Error performing PUT http://127.0.0.1:4443 in 879.892µs - Server returned non-2xx status code: 400 Bad Request: {"error":{"code":400,"message":"invalid uploadType","errors":[{"domain":"global","reason":"invalid","message":"invalid uploadType"}]}}"#;
        assert_eq!(readable(upload), "invalid uploadType (invalid)");
        let token = "Generic GCS error: Error performing token request: Error performing GET http://169.254.169.254 in 1.410344ms - Server returned non-2xx status code: 403 Forbidden";
        assert!(readable(token).starts_with("no Google Cloud credentials were found"));
    }

    #[test]
    fn a_store_that_cannot_be_reached_is_named_by_its_host() {
        let down = "Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:1/b?list-type=2&prefix=p%2F in 2.110569916s, after 10 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: error sending request: client error (Connect): tcp connect error: Connection refused (os error 111)";
        assert_eq!(
            readable(down),
            "cannot connect to http://127.0.0.1:1 (connection refused) after 11 tries in 2.1 s"
        );
        let dns = "Error performing GET https://nowhere.invalid/b?list-type=2 in 20ms - HTTP error: error sending request: client error (Connect): dns error: failed to lookup address information";
        assert_eq!(readable(dns), "cannot find the host nowhere.invalid (DNS)");
        // The client's "retry_timeout" setting is no timeout.
        let reset = "Error performing PUT http://127.0.0.1:9/b/k in 2.4s, after 10 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: error sending request: connection reset by peer";
        assert_eq!(
            readable(reset),
            "the connection to http://127.0.0.1:9 was cut (reset) after 11 tries in 2.4 s"
        );
    }

    #[test]
    fn anything_else_loses_its_query_and_its_repeats() {
        let text =
            "error sending request: error sending request: GET http://h:9/b/k?uploadId=1 failed";
        let said = readable(text);
        assert!(!said.contains('?'), "{said}");
        assert_eq!(said.matches("error sending request").count(), 1, "{said}");
    }
}
