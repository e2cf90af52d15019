-- Herald's own alerts (a delivery failed, a slot skipped, a channel
-- down, ...) to the on-call people.
return rule {
  name     = "ops_alert",
  timezone = "Asia/Shanghai",
  channel  = "mock",
  priority = "high",
  retry    = { "30s", "1m", "2m", "5m" },
  deadline = "1h",

  recipients = function(run)
    return people.where { role = "oncall" }
  end,

  message = function(run, to)
    local d = run.data
    return { msgtype = "markdown",
             content = "**Herald** `" .. (d.kind or "alert") .. "`: " .. tostring(d.message or "") }
  end,
}
