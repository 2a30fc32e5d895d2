#!/usr/bin/env bash
# Every client × server × transport pair the test suite drives through the
# shim with real peers, run one by one, with a verdict per pair: what
# docs/interop.md lists. Needs the peers scripts/test.sh installs
# (tests/peers/node_modules; redis is not needed here).
#
#   scripts/interop.sh            run every pair
#   scripts/interop.sh --list     print the pairs without running them
#
# Exit status: 0 when every pair passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

# client | server | transport | test file | test name
PAIRS=(
  "TS SDK 1.32.2 (2025-11-25)|modern reference server|stdio|legacy_front_ts|ts_sdk_client_through_the_shim_against_the_modern_reference"
  "TS SDK 1.32.2 (2025-11-25)|modern reference server|HTTP|http_legacy_ts|ts_sdk_http_client_through_the_shim_against_the_modern_reference"
  "TS SDK 1.32.2 (2025-11-25)|legacy reference server (direct, no shim)|stdio|reference_legacy_ts|ts_sdk_client_drives_the_legacy_reference_server"
  "2025-11-25 wire client|rmcp 3.11 task server (2026-07-28)|stdio|legacy_front_rmcp|legacy_client_through_the_shim_against_an_rmcp_task_server"
  "rmcp 3.11 client (2026-07-28)|legacy reference server|stdio|modern_front_rmcp|rmcp_client_with_tasks_through_the_shim"
  "rmcp 3.11 client without the tasks extension|legacy reference server|stdio|modern_front_rmcp|rmcp_client_without_tasks_through_the_shim"
  "2026-07-28 wire client|server-everything 2026.8.31 (2025-11-25)|stdio|modern_front_npm|server_everything_behind_the_shim"
  "2026-07-28 wire client|TS SDK 1.32.2 task server (2025-11-25)|stdio|modern_front_npm|sdk_task_server_behind_the_shim"
  "2026-07-28 wire client|server-everything 2026.8.31 (2025-11-25)|HTTP both sides|http_modern_everything|modern_client_through_the_shim_against_server_everything_over_http"
  "2026-07-28 wire client|modern reference server (relay)|HTTP|http_isolation|relayed_modern_clients_cannot_reach_other_principals_tasks"
  "2026-07-28 wire client|legacy reference server|HTTP|http_isolation|modern_clients_cannot_reach_each_others_tasks"
  "2025-11-25 wire client|modern reference server|HTTP|http_isolation|legacy_clients_cannot_reach_each_others_tasks"
  "TS SDK 1.32.2, polling tasks/get only|modern reference server|stdio|legacy_direct_input_ts|a_client_polling_only_tasks_get_over_stdio_gets_each_question_once"
  "TS SDK 1.32.2, waiting on tasks/result|modern reference server|stdio|legacy_direct_input_ts|a_client_waiting_on_tasks_result_over_stdio_gets_each_question_once"
  "TS SDK 1.32.2, polling tasks/get only|modern reference server|HTTP|legacy_direct_input_ts|a_client_polling_only_tasks_get_over_http_gets_each_question_once"
  "TS SDK 1.32.2, waiting on tasks/result|modern reference server|HTTP|legacy_direct_input_ts|a_client_waiting_on_tasks_result_over_http_gets_each_question_once"
  "TS SDK 1.32.2, task call of a forbidden tool|modern reference server|stdio|legacy_front_ts|ts_sdk_task_call_of_a_forbidden_tool_gets_32601"
  "2026-07-28 wire client|scripted 2025-11-25 server whose tasks/result does not block|stdio|modern_front_wire|a_tasks_result_refused_while_working_is_asked_again"
  "2026-07-28 wire client, listen stream|modern reference server over HTTP (relay)|HTTP both sides|http_modern_listen|a_relayed_listen_carries_the_callers_tasks_only"
  "2026-07-28 client omitting Mcp-Name|legacy reference server|HTTP|http_front|a_missing_mcp_name_in_front_of_a_legacy_server"
  "2026-07-28 client omitting Mcp-Name|modern reference server (relay)|HTTP|http_front|a_missing_mcp_name_in_front_of_a_modern_server"
  "TS SDK 1.32.2 (2025-11-25)|legacy reference server (relay, a process per session)|HTTP|http_legacy_relay|ts_sdk_http_client_through_the_relay_against_the_legacy_reference"
  "2025-11-25 wire clients, two principals|TS SDK 1.32.2 task server (2025-11-25)|HTTP|http_legacy_relay|two_principals_in_front_of_the_sdk_task_server"
  "2025-11-25 wire clients, two principals|server-everything 2026.8.31 (2025-11-25)|HTTP|http_legacy_relay|two_principals_in_front_of_server_everything"
)

if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${PAIRS[@]}" | column -t -s '|'
  exit 0
fi

cargo build --quiet --tests
failed=0
results=()
for pair in "${PAIRS[@]}"; do
  IFS='|' read -r client server transport file name <<<"$pair"
  if cargo test --quiet --test "$file" -- --exact "$name" >"/tmp/interop-$file-$name.log" 2>&1; then
    verdict=PASS
  else
    verdict=FAIL
    failed=$((failed + 1))
  fi
  results+=("$verdict|$client|$server|$transport|tests/$file.rs::$name")
  echo "$verdict  $client × $server × $transport" >&2
done
echo
printf '%s\n' "verdict|client|server|transport|test" "${results[@]}" | column -t -s '|'
echo
echo "$(( ${#PAIRS[@]} - failed )) passed, $failed failed"
[[ $failed -eq 0 ]]
