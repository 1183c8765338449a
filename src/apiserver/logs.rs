//! `pods/log`: a container's output, as kube-apiserver serves it for `kubectl logs`
//! (`-c`, `-f`, `--previous`, `--tail`, `--timestamps`, `--since`, `--limit-bytes`).
//!
//! kube-apiserver asks the Pod's kubelet. This server asks whatever runs the Pods, through a
//! [`LogSource`] registered at start-up: a capictl node's API server reads the containers'
//! output from the Docker Engine its kubelet runs them on. Without one (the management cluster,
//! an in-memory workload cluster, whose Pods have no processes) the answer says so.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use http::{StatusCode, header};
use serde_json::Value;

use super::status::ApiError;

/// What `kubectl logs` asks for, from the query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<i64>,
    pub since_seconds: Option<i64>,
    pub limit_bytes: Option<i64>,
}

impl LogOptions {
    /// The options of a query (`container=web&follow=true&tailLines=10`); a number that is
    /// not one is a 400 naming the parameter.
    pub fn parse(query: &super::handlers::Query) -> Result<LogOptions, ApiError> {
        let mut options = LogOptions::default();
        let number = |key: &str, value: &str| {
            value.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("{key}: {value:?} is not a whole number"))
            })
        };
        for (key, value) in query {
            let yes = value == "true" || value == "1";
            match key.as_str() {
                "container" if !value.is_empty() => options.container = Some(value.clone()),
                "follow" => options.follow = yes,
                "previous" => options.previous = yes,
                "timestamps" => options.timestamps = yes,
                "tailLines" => options.tail_lines = Some(number(key, value)?),
                "sinceSeconds" => options.since_seconds = Some(number(key, value)?),
                "limitBytes" => options.limit_bytes = Some(number(key, value)?),
                _ => {}
            }
        }
        Ok(options)
    }
}

/// A container's output, as it comes.
pub type LogStream = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// Where the output of the Pods' containers is read.
pub trait LogSource: Send + Sync {
    /// The output of `container` of `pod`; an error says why there is none, in kubelet's words.
    fn logs(
        &self,
        pod: &Value,
        container: &str,
        options: &LogOptions,
    ) -> BoxFuture<'static, Result<LogStream, String>>;
}

/// The container a request means: the one named, or the Pod's only one; kube-apiserver's
/// errors otherwise.
pub fn container_of(pod: &Value, asked: Option<&str>) -> Result<String, ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let names: Vec<&str> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| pod["spec"][list].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    let app: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    match asked {
        Some(c) if names.contains(&c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if app.len() == 1 => Ok(app[0].to_string()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            app.join(" ")
        ))),
    }
}

/// The response to `GET .../pods/NAME/log`.
pub async fn serve(
    source: Option<&Arc<dyn LogSource>>,
    pod: &Value,
    options: LogOptions,
) -> Result<Response, ApiError> {
    let container = container_of(pod, options.container.as_deref())?;
    let Some(source) = source else {
        return Err(ApiError::bad_request(
            "this API server runs no Pods' containers, so there are no logs to read".to_string(),
        ));
    };
    let stream = source
        .logs(pod, &container, &options)
        .await
        .map_err(ApiError::bad_request)?;
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from_stream(stream))
        .expect("a response"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_container_is_the_one_named_or_the_only_one() {
        let one = json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "httpd"}], "initContainers": [{"name": "setup"}]}});
        assert_eq!(container_of(&one, None).unwrap(), "httpd");
        assert_eq!(container_of(&one, Some("setup")).unwrap(), "setup");
        assert_eq!(
            container_of(&one, Some("nope")).unwrap_err().message,
            "container nope is not valid for pod web"
        );
        let two = json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            container_of(&two, None).unwrap_err().message,
            "a container name must be specified for pod web, choose one of: [a b]"
        );
    }

    #[test]
    fn options_come_from_the_query() {
        let query: super::super::handlers::Query = [
            ("container", "web"),
            ("follow", "true"),
            ("tailLines", "10"),
            ("previous", "false"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let options = LogOptions::parse(&query).unwrap();
        assert_eq!(
            options,
            LogOptions {
                container: Some("web".into()),
                follow: true,
                tail_lines: Some(10),
                ..Default::default()
            }
        );
        let bad = [("tailLines".to_string(), "ten".to_string())].into();
        assert!(LogOptions::parse(&bad).is_err());
    }
}
