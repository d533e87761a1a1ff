-- wrk script of the bench (bench/wrk.ts): the request's method and body come from the environment
-- (headers from -H), and done() prints the run as one JSON line, the last line of wrk's output.
-- No response() function on purpose: with one, wrk parses every answer in Lua, which costs the load
-- generator the CPU the bench is trying to leave to the proxies.
wrk.method = os.getenv("BENCH_METHOD") or wrk.method
wrk.body = os.getenv("BENCH_BODY") or wrk.body

function done(summary, latency, requests)
  local e = summary.errors
  -- Durations and latencies are microseconds; "status" counts answers with a status above 399.
  io.write(string.format(
    '{"requests":%d,"durationUs":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"status":%d,' ..
    '"p50Us":%d,"p90Us":%d,"p99Us":%d,"maxUs":%d,"meanUs":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
