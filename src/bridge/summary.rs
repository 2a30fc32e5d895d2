//! The start-up summary: what a 2025-11-25 client of this shim will be
//! shown, logged once the upstream is probed, so that an operator can
//! check the `taskSupport` policy, the ttl bounds and who counts as a
//! principal without connecting a client.

use serde_json::{Value, json};

use super::BridgeConfig;
use crate::translate::session::{LegacyClient, ModernMeta};
use crate::upstream::{AnyUpstream, ModernUpstream};

/// How many `tools/list` pages the summary reads: enough for any real
/// server, and a bound on one that hands out cursors for ever.
const MAX_PAGES: usize = 20;

/// Logs the summary at info: for a 2026-07-28 upstream it asks for its
/// `tools/list` (the shim's own request, nobody's session) and names the
/// `taskSupport` a 2025-11-25 client is shown per tool. `principals` says
/// who a caller is (the transport knows: tokens, a trusted header, or
/// nobody). Nothing is asked of the upstream when info is not logged, so
/// at the default level the upstream sees only its clients' requests.
pub async fn log_startup_summary(
    upstream: AnyUpstream,
    discover: Value,
    config: BridgeConfig,
    principals: String,
) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let max_task_ttl_ms = config.max_task_ttl_ms;
    let revision = upstream.revision();
    match upstream {
        AnyUpstream::Modern(upstream) => {
            let policy = super::legacy_front::effective_policy(&config, &discover);
            let task_support = match tool_names(upstream.as_ref()).await {
                Ok(names) if names.is_empty() => "(no tools)".to_owned(),
                Ok(names) => names
                    .iter()
                    .map(|name| format!("{name}={}", policy.for_tool(name).as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
                Err(why) => format!("unknown: tools/list failed: {why}"),
            };
            tracing::info!(
                upstream = %revision,
                %task_support,
                max_task_ttl_ms,
                %principals,
                "2025-11-25 clients see these tools with this taskSupport"
            );
        }
        AnyUpstream::Legacy(_) => {
            let task_ttl_ms = config
                .task_ttl_ms
                .map_or_else(|| "the client's".to_owned(), |ms| ms.to_string());
            tracing::info!(
                upstream = %revision,
                task_support = "the upstream's own",
                %task_ttl_ms,
                max_task_ttl_ms,
                %principals,
                "2025-11-25 clients see the upstream's tools as it lists them"
            );
        }
    }
}

/// The names of the upstream's tools, every page.
async fn tool_names(upstream: &dyn ModernUpstream) -> Result<Vec<String>, String> {
    let meta = ModernMeta::for_client(&LegacyClient::undeclared("mcp-tasks-shim-startup-summary"));
    let mut names = Vec::new();
    let mut params = json!({});
    for _ in 0..MAX_PAGES {
        let result = upstream
            .request_with_meta("tools/list", &params, &meta)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.message)?;
        let tools = result.get("tools").and_then(Value::as_array);
        names.extend(
            tools
                .into_iter()
                .flatten()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .map(str::to_owned),
        );
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => break,
        }
    }
    Ok(names)
}
