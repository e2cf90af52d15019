-- "This customer enquiry has had no answer": an API task created when an
-- enquiry arrives, cancelled (DELETE /v1/tasks/KEY) when someone answers.
-- Each level is its own task, so it escalates step by step:
--
--   level 1 (15 min): the assignee
--   level 2 (30 min): the assignee and their manager
--   level 3 (60 min): and the manager's manager
--
-- data: {"enquiry": "8812", "customer": "…", "assignee": "liuyang",
--        "level": 2, "waited": "30m"}
return rule {
  name        = "enquiry_timeout",
  description = "Unanswered customer enquiry, escalating by level",
  timezone    = "Asia/Shanghai",
  channel     = "wecom_sales",
  priority    = "high",
  retry       = { "30s", "1m", "2m" },
  deadline    = "30m",

  recipients = function(run)
    local d = run.data
    local list = { d.assignee }
    local level = tonumber(d.level) or 1
    local boss = d.assignee
    for _ = 2, level do
      local m = people.manager_of(boss)
      if not m then break end
      list[#list + 1] = m
      boss = m.userid
    end
    log.info("enquiry escalation", { enquiry = d.enquiry, level = level, recipients = #list })
    return list
  end,

  message = function(run, to)
    local d = run.data
    local lead = "客户咨询"
    if to.userid ~= d.assignee then
      lead = "【升级 L" .. tostring(d.level) .. "】客户咨询"
    end
    return {
      msgtype = "markdown",
      content = text.render("{{lead}} #{{enquiry}}（{{customer}}）已 {{waited}} 无人回复，请尽快处理。", {
        lead = lead, enquiry = d.enquiry, customer = d.customer, waited = d.waited or "15m",
      }),
    }
  end,
}
