-- Demo for `herald dev`: every 30 seconds, a text message through the mock
-- channel to two people, so something happens within a minute of starting.
return rule {
  name        = "demo",
  description = "Every 30s to two people via the mock channel",
  schedule    = "@every 30s",
  timezone    = "Asia/Shanghai",
  channel     = "mock",
  deadline    = "5m",
  catchup     = "1m",

  recipients = function(run)
    return { "wangfang", "liuyang" }
  end,

  message = function(run, to)
    return {
      msgtype = "text",
      content = text.render("你好 {{name}}，这是 Herald 的演示消息（{{at}}）。", {
        name = to.name or to.userid,
        -- a time a person reads says its zone
        at = time.format(time.now(), "15:04:05") .. " " .. run.zone,
      }),
    }
  end,
}
