-- Customer follow-up reminder, triggered by an API task:
--
--   POST /v1/tasks {"key": "follow-8812", "rule": "follow_up",
--                   "due_at": "2026-12-01T15:00:00+08:00",
--                   "data": {"owner": "wangfang", "customer": "华东机电",
--                            "note": "确认报价", "overdue": false}}
--
-- With "overdue": true the reminder also goes to the owner's manager.
--
-- Compensation: when the owner's reminder finally fails (every retry spent,
-- or past its deadline), on_failed submits another follow_up task, due 30
-- minutes after the reminder's time (at once if that has passed), with
-- "undelivered": true: that one goes to the owner's manager only, asking
-- them to pass it on.
return rule {
  name        = "follow_up",
  description = "Follow-up reminder to the owner; escalates to the manager when overdue or undelivered",
  timezone    = "Asia/Shanghai",
  channel     = "wecom_sales",
  priority    = "normal",
  deadline    = "1h",

  recipients = function(run)
    local owner = run.data.owner
    if not owner then
      error("follow_up needs data.owner")
    end
    if run.data.undelivered then
      local m = people.manager_of(owner)
      if not m then
        log.warn("undelivered follow-up: the owner has no manager", { owner = owner })
        return {}
      end
      return { m }
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
    local note = d.note or "按约定跟进"
    if to.userid ~= d.owner then
      local owner = people.get(d.owner)
      local who = owner and owner.name or d.owner
      local tpl = "【逾期】{{who}} 对客户「{{customer}}」的跟进（{{note}}）已逾期，请关注。"
      if d.undelivered then
        tpl = "【未送达】发给 {{who}} 的跟进提醒未能送达：客户「{{customer}}」（{{note}}）。请代为跟进或转告。"
      end
      return { msgtype = "text", text = { content = text.render(tpl,
        { who = who, customer = d.customer, note = note }) } }
    end
    return { msgtype = "text", text = { content = text.render(
      "{{name}}，请跟进客户「{{customer}}」：{{note}}",
      { name = to.name or to.userid, customer = d.customer, note = note }) } }
  end,

  -- d is the failed delivery: {id, recipient, state, attempts, error}.
  on_failed = function(run, d)
    local data = run.data
    if data.undelivered or d.recipient ~= data.owner then
      return -- the manager's copy failed too: the alert to ops is enough
    end
    -- The key comes from the failed delivery's id: on_failed runs at least
    -- once, and the same key and body again finds the task already there.
    local ok, err = task.submit {
      key   = "follow-undelivered-" .. d.id,
      rule  = "follow_up",
      after = "30m", -- from the run's slot (the reminder's due time), never the clock
      data  = { owner = data.owner, customer = data.customer, note = data.note, undelivered = true },
    }
    if not ok then
      error(err) -- an on_failed error raises an alert
    end
  end,
}
