-- Customer follow-up reminder, triggered by an API task:
--
--   POST /v1/tasks {"key": "follow-8812", "rule": "follow_up",
--                   "due_at": "2026-12-01T15:00:00+08:00",
--                   "data": {"owner": "wangfang", "customer": "华东机电",
--                            "note": "确认报价", "overdue": false}}
--
-- With "overdue": true the reminder also goes to the owner's manager.
return rule {
  name        = "follow_up",
  description = "Follow-up reminder to the owner; escalates to the manager when overdue",
  timezone    = "Asia/Shanghai",
  channel     = "wecom_sales",
  priority    = "normal",
  deadline    = "1h",

  recipients = function(run)
    local owner = run.data.owner
    if not owner then
      error("follow_up needs data.owner")
    end
    local list = { owner }
    if run.data.overdue then
      local m = people.manager_of(owner)
      if m then list[#list + 1] = m end
    end
    return list
  end,

  message = function(run, to)
    local d = run.data
    if to.userid ~= d.owner then
      local owner = people.get(d.owner)
      local who = owner and owner.name or d.owner
      return { msgtype = "text", text = { content = text.render(
        "【逾期】{{who}} 对客户「{{customer}}」的跟进（{{note}}）已逾期，请关注。",
        { who = who, customer = d.customer, note = d.note or "按约定跟进" }) } }
    end
    return { msgtype = "text", text = { content = text.render(
      "{{name}}，请跟进客户「{{customer}}」：{{note}}",
      { name = to.name or to.userid, customer = d.customer, note = d.note or "按约定跟进" }) } }
  end,
}
