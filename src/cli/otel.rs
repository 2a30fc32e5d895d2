//! With the `otel` feature, the `mcp.request` spans of the HTTP front go
//! to an OpenTelemetry collector over OTLP/HTTP, configured by the
//! standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SERVICE_NAME`, …). Without
//! an endpoint, nothing is exported. Without the feature, the spans still
//! exist (log lines inside a request carry them) and this is a no-op.

#[cfg(feature = "otel")]
mod enabled {
    use std::sync::OnceLock;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// The provider, for [`flush`]: its batch processor holds spans not
    /// yet sent.
    static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

    /// The OTLP layer, when an endpoint is configured.
    pub(crate) fn layer<S>() -> Option<impl tracing_subscriber::Layer<S>>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let configured = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|e| !e.is_empty()));
        if !configured {
            return None;
        }
        let exporter = match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
        {
            Ok(e) => e,
            Err(e) => {
                // Logging is not up yet: this is the one place to say it.
                eprintln!("mcp-tasks-shim: OTLP trace export is off: {e}");
                return None;
            }
        };
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("mcp-tasks-shim");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("mcp-tasks-shim");
        let _ = PROVIDER.set(provider);
        // Request spans whatever `--log` says: that filter is the log
        // lines' own.
        let spans = tracing_subscriber::filter::Targets::new()
            .with_target("mcp_tasks_shim", tracing::Level::INFO);
        Some(tracing_subscriber::Layer::with_filter(
            tracing_opentelemetry::layer().with_tracer(tracer),
            spans,
        ))
    }

    /// Sends the spans still held, before the process exits.
    pub(crate) fn flush() {
        if let Some(provider) = PROVIDER.get()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("mcp-tasks-shim: OTLP trace export at exit: {e}");
        }
    }
}

#[cfg(feature = "otel")]
pub(super) use enabled::{flush, layer};

/// No exporter in this build.
#[cfg(not(feature = "otel"))]
pub(super) fn layer() -> Option<tracing_subscriber::layer::Identity> {
    None
}

/// Nothing to send in this build.
#[cfg(not(feature = "otel"))]
pub(super) fn flush() {}
