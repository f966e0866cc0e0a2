//! The OTLP exporter `countersign-mcp` installs when the standard OpenTelemetry variables ask
//! for one.
//!
//! The variables are the SDK's own (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `…_HEADERS`, `…_TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`), so a deployment configured
//! for any other OpenTelemetry program configures this one. Only `http/protobuf` is spoken: a
//! protocol asked for by name that is not it refuses the start rather than export nothing.
//!
//! Spans are batched and sent from the batch processor's own thread, so a call pays for
//! building its spans and never for the export.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use crate::error::Error;

/// The one protocol spoken.
const HTTP_PROTOBUF: &str = "http/protobuf";

/// The service name when `OTEL_SERVICE_NAME` does not give one.
const SERVICE: &str = "countersign-mcp";

/// An installed exporter; [`Export::shutdown`] sends what is still batched.
#[derive(Debug)]
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// The exporter the environment asks for: `None` without an OTLP endpoint, or when
    /// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turns export off.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for a protocol other than `http/protobuf`, an exporter other than
    /// `otlp`, or an endpoint or header the SDK cannot use.
    pub fn from_env() -> Result<Option<Export>, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Export::from_env`] with the variables read through `var` (an embedder's own settings)
    /// instead of the process's environment; the SDK still reads `OTEL_EXPORTER_OTLP_HEADERS`,
    /// `…_TIMEOUT`, `OTEL_BSP_*` and the resource variables from the environment.
    ///
    /// # Errors
    /// As [`Export::from_env`].
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Option<Export>, Error> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match set("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(Error::Config(format!(
                    "OTEL_TRACES_EXPORTER={other}: only otlp (or none) is supported"
                )));
            }
        }
        // The signal's own endpoint is used as given, the general one with the path of traces
        // under it (the specification's rule).
        let endpoint = match (
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(traces), _) => traces.trim().to_owned(),
            (None, Some(base)) => format!("{}/v1/traces", base.trim().trim_end_matches('/')),
            (None, None) => return Ok(None),
        };
        plain_http(&endpoint)?;
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = set(name)
                && p.trim() != HTTP_PROTOBUF
            {
                return Err(Error::Config(format!(
                    "{name}={}: only {HTTP_PROTOBUF} is supported",
                    p.trim()
                )));
            }
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| Error::Config(format!("OpenTelemetry export: {e}")))?;
        let resource = match set("OTEL_SERVICE_NAME") {
            Some(_) => Resource::builder().build(),
            None => Resource::builder().with_service_name(SERVICE).build(),
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(Some(Export { provider }))
    }

    /// The layer that turns the layer's spans (those of target [`super::TARGET`], nothing
    /// else) into OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("countersign"))
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
            .with_filter(filter_fn(|meta| meta.target() == super::TARGET))
    }

    /// Sends what is still batched and stops the exporter; a failure is logged, never fatal.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "OpenTelemetry export did not finish");
        }
    }
}

/// Refuses an endpoint the exporter cannot reach: its client speaks plain HTTP only, so an
/// `https://` collector would start fine and then fail every batch, unseen. The error names the
/// scheme alone: an endpoint may carry a user name or a key in its query.
fn plain_http(endpoint: &str) -> Result<(), Error> {
    let scheme = endpoint
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http") => Ok(()),
        Some("https") => Err(Error::Config(
            "OTEL_EXPORTER_OTLP_ENDPOINT is https://: the exporter speaks plain HTTP only; \
             point it at a collector or agent beside the server, which forwards over TLS"
                .into(),
        )),
        _ => Err(Error::Config(
            "OTEL_EXPORTER_OTLP_ENDPOINT: give an http:// URL".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn no_endpoint_or_export_turned_off_installs_nothing() {
        assert!(Export::from_lookup(with(&[])).expect("none").is_none());
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert!(
                Export::from_lookup(with(&[on, off]))
                    .expect("off")
                    .is_none()
            );
        }
    }

    #[test]
    fn a_protocol_or_exporter_not_spoken_refuses_the_start() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
        ] {
            let e = Export::from_lookup(with(&[on, (name, value)])).expect_err(value);
            assert_eq!(e.code().as_str(), "CONFIG_INVALID");
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    #[test]
    fn an_endpoint_the_exporter_cannot_reach_refuses_the_start() {
        for (name, value) in [
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "https://user:k3y@collector.example:4318",
            ),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "HTTPS://collector.example/v1/traces",
            ),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector.example:4318"),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "grpc://collector.example:4317",
            ),
        ] {
            let e = Export::from_lookup(with(&[(name, value)])).expect_err(value);
            assert_eq!(e.code().as_str(), "CONFIG_INVALID");
            assert!(!e.to_string().contains("k3y"), "{e}");
            assert!(!e.to_string().contains("collector.example"), "{e}");
        }
        let upper = ("OTEL_EXPORTER_OTLP_ENDPOINT", "HTTP://127.0.0.1:4318");
        assert!(Export::from_lookup(with(&[upper])).expect("http").is_some());
    }
}
