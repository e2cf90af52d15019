-- Customer follow-up reminder, triggered by an API task:
--
--   POST /v1/tasks {"key": "follow-8812", "rule": "follow_up",
--                   "due_at": "2026-12-01T15:00:00+08:00",
--                   "data": {"owner": "wangfang", "customer": "华东机电",
--                            "note": "确认报价", "overdue": false}}
--
-- With "overdue": true the reminder also goes to the owner's manager.
-- With "followup": "8812" the owner's card's 已跟进 cancels every pending
-- task keyed "follow-8812-…" (see on_action).
--
-- Digest: reminders to one person whose times fall in the same 10-minute
-- window (windows aligned on the clock: 09:00–09:10, 09:10–09:20, …) go as
-- one message listing every customer, at the window's end; someone with a
-- single reminder in the window gets the plain message. 30 customers due
-- for one owner at 09:00 are one message at 09:10, not 30 pushes.
--
-- Quiet hours: a reminder due between 22:00 and 08:00 in the person's zone
-- waits until 08:00 there (the deadline of 12h leaves room for that).
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
  deadline    = "12h",
  quiet_hours = { from = "22:00", to = "08:00" },

  digest = {
    window = "10m",
    -- items: one per folded reminder, {id, key, slot, zone, data, payload},
    -- in the order of their times.
    -- WeCom takes at most 2048 bytes of markdown (Herald refuses more
    -- rather than let WeCom cut it, and a refused digest fails every
    -- reminder in it): list the customers that fit, then say how many more.
    message = function(to, items)
      local head = text.render("**{{name}}，{{n}} 位客户待跟进**\n", {
        name = to.name or to.userid, n = #items,
      })
      local budget = 2048 - #head - 64 -- 64: room for the "另有 N 位" line
      local lines, used = {}, 0
      for i, it in ipairs(items) do
        local d = it.data
        local line = i .. ". " .. (d.customer or "?") .. "：" .. (d.note or "按约定跟进")
        if d.undelivered then
          line = line .. "（代 " .. d.owner .. " 跟进，原提醒未送达）"
        elseif to.userid ~= d.owner then
          line = line .. "（" .. d.owner .. " 逾期）"
        end
        if used + #line + 1 > budget then
          lines[#lines + 1] = "……另有 " .. (#items - i + 1) .. " 位客户，请在 CRM 中查看"
          break
        end
        lines[#lines + 1] = line
        used = used + #line + 1
      end
      return { msgtype = "markdown", content = head .. table.concat(lines, "\n") }
    end,
  },

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
    -- The owner's reminder is a card with buttons; a click comes back to
    -- on_action below.
    return { msgtype = "template_card", template_card = {
      card_type = "button_interaction",
      main_title = { title = "客户跟进提醒", desc = d.customer },
      sub_title_text = text.render("{{name}}，请跟进客户「{{customer}}」：{{note}}",
        { name = to.name or to.userid, customer = d.customer, note = note }),
      button_list = {
        { text = "已跟进", style = 1, key = "done" },
        { text = "1小时后再提醒", style = 2, key = "later" },
      },
    } }
  end,

  -- A click on the owner's card; action is {key, userid, at, event,
  -- delivery}. 已跟进 stops this follow-up's reminders: every pending task
  -- of it (keys "follow-ID-…", ID being data.followup: the CRM's own
  -- reminders and those 1小时后再提醒 queued) is cancelled. The card is then
  -- replaced to say who handled it and when. Like on_event it runs at
  -- least once: the task key comes from the delivery, never the clock.
  on_action = function(run, to, action)
    local d = run.data
    local who = (people.get(action.userid) or {}).name or action.userid
    local when = string.sub(action.at, 6, 10) .. " " .. string.sub(action.at, 12, 16)
    local prefix = d.followup and ("follow-" .. d.followup .. "-") or nil
    local said
    if action.key == "done" then
      if prefix then
        for _, t in ipairs(task.pending(prefix)) do
          task.cancel(t.key)
        end
      end
      said = text.render("✅ {{who}} 已于 {{when}} 跟进", { who = who, when = when })
    elseif action.key == "later" then
      local ok, err = task.submit {
        key   = (prefix or "follow-") .. "again-" .. action.delivery,
        rule  = "follow_up",
        after = "1h", -- from the reminder's time
        data  = d,
      }
      if not ok then error(err) end
      said = text.render("⏰ {{who}} 选择 1 小时后再提醒（{{when}}）", { who = who, when = when })
    else
      return nil -- the replaced card's own button: nothing more to do
    end
    return { msgtype = "template_card", template_card = {
      card_type = "button_interaction",
      main_title = { title = "客户跟进提醒", desc = d.customer },
      sub_title_text = said,
      button_list = { { text = "已处理", style = 2, key = "handled" } },
    } }
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
