-- Where Herald's own alerts go. The engine triggers this rule (as an API
-- task) when a delivery finally fails or expires, a slot is skipped, or a
-- channel is misconfigured, with data such as
--
--   {"kind": "delivery_failed", "severity": "warning", "rule": "daily_report",
--    "run": "daily_report@2026-12-01T01:00:00Z", "recipient": "wangfang",
--    "message": "errcode 60020: not allow to access from your ip"}
--
-- Warnings go to the on-call people; critical alerts to all of ops.
return rule {
  name        = "ops_alert",
  description = "Herald's own alerts, to on-call (critical: all of ops)",
  timezone    = "Asia/Shanghai",
  channel     = "wecom_ops",
  priority    = "high",
  retry       = { "30s", "1m", "2m", "5m" },
  deadline    = "1h",

  recipients = function(run)
    if run.data.severity == "critical" then
      return people.where { department = "ops" }
    end
    return people.where { role = "oncall" }
  end,

  message = function(run, to)
    local d = run.data
    local lines = {
      "**Herald 告警** `" .. (d.kind or "alert") .. "` (" .. (d.severity or "warning") .. ")",
    }
    for _, k in ipairs({ "rule", "run", "recipient", "channel", "message" }) do
      if d[k] then
        lines[#lines + 1] = "> " .. k .. ": " .. tostring(d[k])
      end
    end
    return { msgtype = "markdown", content = table.concat(lines, "\n") }
  end,
}
