-- Birthday greetings at 08:00 China time, every day of the year, by solar
-- or lunar (农历) birthday. High priority: they use reserved capacity, and a
-- greeting that could not go by noon is not sent at all (deadline 4h).
--
-- Policy (people.birthdays_on): 29 February birthdays are greeted on 28
-- February in other years; a lunar 30th is greeted on the 29th in a short
-- month; a leap-month (闰) birthday in the regular month when the year has
-- no such leap month.
return rule {
  name        = "birthday",
  description = "08:00 birthday greetings, solar and lunar, by noon",
  schedule    = "0 8 * * *",
  timezone    = "Asia/Shanghai",
  channel     = "wecom_sales",
  priority    = "high",
  stagger     = { jitter = "2m" },
  retry       = { "1m", "5m", "15m", "30m" },
  deadline    = "4h",

  recipients = function(run)
    return people.birthdays_on(run.date)
  end,

  message = function(run, to)
    local greeting
    if to.birthday_kind == "lunar" then
      local l = calendar.lunar(run.date)
      greeting = "今天是农历" .. l.text .. "，" .. to.name .. "，祝你生日快乐！🎂"
    else
      greeting = to.name .. "，生日快乐！🎂 祝新的一岁顺顺利利。"
    end
    return { msgtype = "text", text = { content = greeting } }
  end,
}
