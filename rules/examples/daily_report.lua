-- Daily report reminder: 09:00 in each salesperson's own time on workdays
-- (statutory holidays off, make-up workdays 调休 on, by their local date),
-- spread over five minutes. timezone = "recipient" fires the schedule once
-- per zone of the people file: Shanghai at 09:00 CST, Berlin at 09:00
-- CET/CEST, New York at 09:00 EST/EDT; people without a timezone column
-- get default_timezone's 09:00.
--
-- Quiet hours: a reminder that would go between 22:00 and 08:00 in the
-- person's zone (a slot fired late, a retry, a backfill) waits until 08:00
-- there; a person's own quiet_hours column (people.csv) wins over the
-- rule's. Someone whose reminder finally failed earlier gets this one with
-- a note (to.missed lists the missed slots), which is Herald's
-- compensation.
return rule {
  name        = "daily_report",
  description = "09:00 workday report reminder to every salesperson",
  schedule    = "0 9 * * *",
  timezone         = "recipient",
  default_timezone = "Asia/Shanghai",
  calendar    = "cn_workday",
  quiet_hours = { from = "22:00", to = "08:00" },
  channel     = "wecom_sales",
  priority    = "normal",
  stagger     = { jitter = "5m" },
  retry       = { "1m", "5m", "15m" },
  deadline    = "2h",
  catchup     = "1h",

  recipients = function(run)
    return people.where { role = "sales" }
  end,

  message = function(run, to)
    -- run.date and run.zone are the person's: each zone has its own run.
    local body = text.render("**{{date}} 日报**\n{{name}}，请在 10:00（{{zone}}）前提交今日销售日报。", {
      date = run.date,
      zone = run.zone,
      name = to.name or to.userid,
    })
    if #to.missed > 0 then
      local days = {}
      for i, slot in ipairs(to.missed) do
        days[i] = time.format(slot, "01-02")
      end
      body = body .. "\n> 补发：" .. table.concat(days, "、") .. " 的日报提醒未能送达，请一并补交。"
    end
    return { msgtype = "markdown", content = body }
  end,
}
