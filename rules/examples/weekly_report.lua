-- Weekly report: Monday 09:00. When Monday is a statutory holiday the
-- reminder moves to the next workday (shift = "next_workday") instead of
-- being dropped.
return rule {
  name        = "weekly_report",
  description = "Monday 09:00 weekly report to sales; moves to the next workday after a holiday",
  schedule    = "0 9 * * 1",
  timezone    = "Asia/Shanghai",
  calendar    = "cn_workday",
  shift       = "next_workday",
  channel     = "wecom_sales",
  stagger     = { batches = 2, spacing = "2m" },
  deadline    = "4h",

  recipients = function(run)
    return people.where { department = "sales" }
  end,

  message = function(run, to)
    local week_start = time.add_days(time.now(), -7)
    local note = ""
    if time.weekday(time.now()) ~= 1 then
      note = "（周一为法定节假日，顺延至今日）"
    end
    local is_manager = false
    for _, role in ipairs(to.roles) do
      if role == "manager" or role == "director" then is_manager = true end
    end
    local ask = "请提交上周（" .. time.date(week_start) .. " 起）的周报。"
    if is_manager then
      ask = "请汇总团队上周（" .. time.date(week_start) .. " 起）的周报。"
    end
    return {
      msgtype = "text",
      text = { content = (to.name or to.userid) .. "，" .. ask .. note },
    }
  end,
}
