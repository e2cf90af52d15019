-- Daily report reminder: 09:00 China time on workdays (statutory holidays
-- off, make-up workdays 调休 on) to every salesperson, spread over five
-- minutes. Someone whose reminder finally failed earlier gets this one with
-- a note (to.missed lists the missed slots), which is Herald's compensation.
return rule {
  name        = "daily_report",
  description = "09:00 workday report reminder to every salesperson",
  schedule    = "0 9 * * *",
  timezone    = "Asia/Shanghai",
  calendar    = "cn_workday",
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
    local body = text.render("**{{date}} 日报**\n{{name}}，请在 10:00 前提交今日销售日报。", {
      date = run.date,
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
