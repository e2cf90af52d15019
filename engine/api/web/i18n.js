// Herald dashboard: the words, in 中文 and English. The page follows the
// browser's language (zh* → 中文, anything else → English) until the
// operator picks one with the 中文 / EN switch, which this browser keeps.
// Every string a person reads comes from here; the API's own reasons
// (errors, rule errors) are shown as the API wrote them, after a
// translated lead-in.
"use strict";

const LANG_KEY = "herald.lang";

const WORDS = {
  en: {
    title: "Herald", operator: "operator", connecting: "connecting…", "not yet loaded": "not yet loaded",
    viewing: "Viewing", leader: "leader", follower: "follower", candidate: "candidate", unknown: "unknown",
    "leader is": "leader", term: "term", applied: "applied",
    lang: "Language", zone: "Time zone", wall: "Wall mode", "exit wall": "Exit wall mode",
    cluster: "Cluster", channels: "Channels", alerts: "Alerts", rules: "Rules", stats: "Day statistics",
    runs: "Recent runs", tasks: "API tasks", deliveries: "Recent deliveries", day: "The day in pictures",
    person: "Find a person", upcoming: "Next fire times", missed: "Should have fired and did not",
    "sends per minute": "Sends per minute", lateness: "Lateness: slot → sent",
    "all rules": "all rules", "all states": "all states", date: "Date", rule: "Rule", state: "State",
    "by slot date": "by the slot's date in each rule's zone",
    member: "Member", vote: "Vote", raft: "Raft", http: "HTTP", "rule set": "Rule set", voter: "voter",
    "non-voter": "non-voter", "you are here": "you are here", differs: "differs", "open member": "open this member's dashboard",
    file: "File", hash: "Hash", status: "Status", ok: "ok", "rule error": "✗ Error: last good version running",
    paused: "paused", "paused by": "by {who}", note: "note", "no file": "no file on this node: stays paused until resumed", channel: "Channel", plugin: "Plugin", health: "Health", healthy: "healthy", unhealthy: "unhealthy", error: "Error",
    alert: "Alert", count: "Count", first: "First", last: "Last", ack: "Ack", acking: "Acking…", acknowledged: "acknowledged",
    "ack failed": "Ack failed", slot: "Slot", planned: "Planned", late: "late", recipient: "Recipient",
    attempts: "Attempts", "last error": "Last error", "sent at": "Sent at", "click for details": "click for details",
    key: "Key", due: "Due", "deliveries col": "Deliveries", id: "id", run: "run", priority: "priority",
    "not before": "not before", deadline: "deadline", "next attempt": "next attempt", ended: "ended",
    "provider id": "provider id", claim: "claim", "claim text": "attempt in flight by {leader} (term {term}) until ",
    content: "Message as sent", failures: "Failed attempts", attempt: "attempt {n}",
    runs_k: "runs", late_runs: "late", skipped_runs: "skipped", planned_k: "planned", sent: "sent", pending: "pending",
    claimed: "claimed", failed: "failed", expired: "expired", cancelled: "cancelled", skipped: "skipped", planning: "planning",
    missing: "did not fire", fired: "fired", success: "success", "avg delay": "avg delay",
    "slot to sent": "Slot → sent avg / p95", "failure reasons": "Failures", "tasks due": "tasks due",
    "from slot to sent": "from slot to sent; p95 {p95}",
    node: "Node", "no leader": "none", "no leader title": "no leader: nothing is sent until one is elected",
    "rules ok": "{n} ok", "rules broken": "{b} of {n} broken", "channels healthy": "{h} / {n} healthy",
    "open alerts": "Open alerts", "today sent": "Sent today", "today failed": "Failed today", "today pending": "Pending",
    "p95 today": "p95 slot → sent", "missed today": "Did not fire",
    "alerts count": "{open} open · {total} total", "newest of": "newest {n} of {total}",
    "tasks count": "{n}{more} {state}, soonest first", "in all": "in all",
    "no members": "No members known. Is this node bootstrapped or joined?",
    "no rules": "No rules loaded. Put .lua rule files in this node's rules directory.",
    "no channels": "No channels configured on this node.", "no alerts": "No alerts. All quiet.",
    "no runs": "No runs yet. A run appears when a rule's schedule or a task comes due.",
    "no deliveries": "No deliveries yet.", "no match": "No deliveries match these filters.",
    "no tasks": "No API tasks.", "no tasks state": "No {state} tasks.",
    "nothing today": "Nothing planned or sent today yet.", "nothing on": "Nothing was planned for {date}.",
    "no sends": "Nothing sent on this day yet.", "no lateness": "No sends to measure yet.",
    "no upcoming": "No scheduled rules.", "none missed": "Every slot due so far fired.",
    "could not refresh": "Could not refresh: ", "not answering": "This node's API is not answering: ",
    "showing from": " — showing data from {at}.", "stale since": "stale since {at}", "no data": "no data", updated: "updated {at}",
    footer: "Times are in {zone}; hover one for its RFC 3339 value. Refreshes every {s} s.",
    "cannot reach": "cannot reach the node ({why})", "not json": "the answer is not JSON",
    "search placeholder": "userid or name, e.g. lina or 李娜", search: "Search",
    "person none": "No deliveries to {who} on {date}.", "person found": "{who} — {date}: {n} deliveries",
    "type a name": "Type a userid or a name to see every message to that person on a day.",
    "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", max: "max", estimated: "estimated from coarse buckets (recorded by an older build)",
    "precise": "from the recorded times, within {pct}",
    "chart axis": "minute ({zone})", "failures red": "failures (red)", "next fires": "Next fires", schedule: "Schedule",
    "missed slot": "{rule}: slot {slot} {state}", "more missed": "and {n} more",
    confirm: "Confirm", cancel: "Cancel", done: "Done", "action failed": "Failed: {why}",
    fire: "Fire now", "fire q": "Fire rule {rule} now? Every recipient gets a message (an extra run, once).",
    "fire ok": "Rule {rule} fired: run {run}.", "fire ok paused": "Rule {rule} fired: run {run}. The rule is paused: its messages wait until it is resumed.",
    "ack q": "Acknowledge this alert? It stays listed until pruned and re-opens if its message changes.",
    "ack ok": "Alert acknowledged.",
    retry: "Retry", "retry q": "Send this {state} delivery to {who} again now, with the same idempotency key?",
    "retry ok": "Retry queued: {n} delivery will be sent again.",
    recall: "Recall", "recall q": "Take this message back from {who}'s chat? (WeCom app messages within 24 h)",
    "recall ok": "Recalled.", "recall pending": "Recall asked; the channel has not answered yet.", "recalled by": "recalled by {by} at ",
    recalled: "recalled", awaiting_approval: "awaiting approval", rejected: "rejected",
    clicks: "Card clicks", "click text": "{who} clicked “{key}”", "card pending": "card update pending",
    "card updated": "card updated", "card failed": "card not updated",
    approve: "Approve", reject: "Reject", "approval text": "Held for approval: {n} people (over {over}). First message:",
    "approve q": "Approve run {run}? {n} people get the message shown.", "approve ok": "Approved: {n} message(s) released.",
    "reject q": "Reject run {run}? None of the {n} messages is sent.", "reject ok": "Rejected: {n} message(s) cancelled.",
    pause: "Pause", resume: "Resume", "pause q": "Pause rule {rule}? Its slots are recorded as paused and its unsent messages wait.",
    "resume q": "Resume rule {rule}? Held messages still inside their deadline go out.",
    "pause ok": "Rule {rule} paused.", "resume ok": "Rule {rule} resumed.", "reason": "Reason (optional)",
    "http 503": "the node cannot answer now (no leader, or busy); try again", "http 403": "not allowed",
    "http 401": "a token is needed", "http 404": "not found", "http 409": "conflict",
    "wall title": "Herald — {date}",
    // Alert titles and texts, by kind (see engine.AlertKind).
    "alert.delivery_failed": "Delivery failed", "alert.delivery_expired": "Delivery expired",
    "alert.slot_skipped": "Slot skipped", "alert.channel_config": "Channel misconfigured",
    "alert.send_stuck": "Send stuck", "alert.rule_error": "Rule failed", "alert.run_late": "Run late",
    "alert.compensation_error": "Compensation failed", "alert.other": "Alert",
    "alertx.delivery_failed": "{rule}: the message to {recipient} (run {run}) failed after {count} attempt(s): [{code}] {error}",
    "alertx.delivery_expired": "{rule}: the message to {recipient} (run {run}) reached its deadline unsent and expired",
    "alertx.slot_skipped": "{rule}: slot {slot} was missed beyond its catch-up window and skipped",
    "alertx.channel_config": "Channel {channel} is misconfigured ({code}): {error}",
    "alertx.send_stuck": "A send on channel {channel} outlived its claim ({late}); it is sent again with the same idempotency key",
    "alertx.rule_error": "Rule {rule} failed to plan run {run}: {error}",
    "alertx.run_late": "Run {run} is still planning {late} after its slot",
    "alertx.compensation_error": "on_failed of rule {rule} failed for the message to {recipient}: {error}",
    "alert.quiet_expired": "Held past its deadline", "alert.rules_mismatch": "Rule sets differ",
    "alert.rule_broken": "Rule file broken", "alert.channel_down": "Channel down", "alert.directory": "People directory",
    "alert.digest_error": "Digest not built", "alert.clock_skew": "Clock skew", "alert.disk_write": "Disk write failing",
    "alertx.clock_skew": "The clocks of {nodes} differ from the majority's by more than the max clock skew: {error}",
    "alertx.disk_write": "Node {nodes} has failed to write its data dir since {since} ({error}). It stores no new Raft entries until it can: free space in its data dir or replace the disk.",
    "alertx.digest_error": "Rule {rule} could not build the digest of {count} message(s) to {recipient} ({error}); they go one by one",
    "alertx.quiet_expired": "{count} message(s) of {rule} (run {run}) fall in quiet hours that end after their deadline; they will expire unsent",
    "alertx.rules_mismatch": "The nodes' rule sets have differed since {since}: {error}. Deploy the same rules directory to every node.",
    "alertx.rule_broken": "Rule file {file} is broken on {nodes}: {error}. Its last good version stays in force.",
    "alertx.channel_down": "Channel {channel} has been unhealthy since {since}: {error}. Its messages wait and expire at their deadline.",
    "alert count": "×{n}",
    "token button": "Token…", "token title": "Enter another API token", "token heading": "API token", "token label": "Token", "use token": "Use token",
    audit: "Audit trail", "audit count": "newest {n}{more}", "no audit": "No write recorded yet.",
    when: "When", actor: "Who", remote: "From", via: "via {node}", action: "Action", target: "Target", node: "Node",
  },
  zh: {
    title: "Herald", operator: "运维台", connecting: "连接中…", "not yet loaded": "尚未加载",
    viewing: "当前节点", leader: "领导者", follower: "跟随者", candidate: "候选者", unknown: "未知",
    "leader is": "领导者", term: "任期", applied: "已应用",
    lang: "语言", zone: "时区", wall: "大屏模式", "exit wall": "退出大屏",
    cluster: "集群", channels: "通道", alerts: "告警", rules: "规则", stats: "当日统计",
    runs: "最近运行", tasks: "API 任务", deliveries: "最近投递", day: "今日图表",
    person: "查找收件人", upcoming: "下次触发时间", missed: "应触发而未触发",
    "sends per minute": "每分钟发送量", lateness: "延迟：计划时刻 → 发出",
    "all rules": "全部规则", "all states": "全部状态", date: "日期", rule: "规则", state: "状态",
    "by slot date": "按各规则时区内计划时刻的日期",
    member: "成员", vote: "投票", raft: "Raft", http: "HTTP", "rule set": "规则集", voter: "投票成员",
    "non-voter": "非投票成员", "you are here": "当前节点", differs: "不一致", "open member": "打开该成员的控制台",
    file: "文件", hash: "哈希", status: "状态", ok: "正常", "rule error": "✗ 错误：仍在运行上一个正确版本",
    paused: "已暂停", "paused by": "由 {who}", note: "备注", "no file": "本节点无此规则文件：恢复前一直暂停", channel: "通道", plugin: "插件", health: "健康", healthy: "健康", unhealthy: "异常", error: "错误",
    alert: "告警", count: "次数", first: "首次", last: "最近", ack: "确认", acking: "确认中…", acknowledged: "已确认",
    "ack failed": "确认失败", slot: "计划时刻", planned: "已规划", late: "迟到", recipient: "收件人",
    attempts: "尝试次数", "last error": "最近错误", "sent at": "发出时间", "click for details": "点击查看详情",
    key: "键", due: "到期", "deliveries col": "投递", id: "ID", run: "运行", priority: "优先级",
    "not before": "最早发送", deadline: "截止", "next attempt": "下次尝试", ended: "结束",
    "provider id": "服务商消息 ID", claim: "认领", "claim text": "正在由 {leader}（任期 {term}）发送，租约至 ",
    content: "实际发送的内容", failures: "失败的尝试", attempt: "第 {n} 次",
    runs_k: "运行", late_runs: "迟到", skipped_runs: "跳过", planned_k: "已规划", sent: "已发送", pending: "待发送",
    claimed: "发送中", failed: "失败", expired: "已过期", cancelled: "已取消", skipped: "已跳过", planning: "规划中",
    missing: "未触发", fired: "已触发", success: "成功率", "avg delay": "平均延迟",
    "slot to sent": "计划 → 发出 平均 / p95", "failure reasons": "失败原因", "tasks due": "待执行任务",
    "from slot to sent": "从计划时刻到发出；p95 {p95}",
    node: "节点", "no leader": "无", "no leader title": "没有领导者：选出之前不会发送任何消息",
    "rules ok": "{n} 条正常", "rules broken": "{n} 条中 {b} 条出错", "channels healthy": "{h} / {n} 健康",
    "open alerts": "未确认告警", "today sent": "今日已发送", "today failed": "今日失败", "today pending": "待发送",
    "p95 today": "p95 计划 → 发出", "missed today": "未触发",
    "alerts count": "{open} 条未确认 · 共 {total} 条", "newest of": "最新 {n} 条，共 {total} 条",
    "tasks count": "{n}{more} 条{state}，按到期时间排序", "in all": "",
    "no members": "没有已知成员。该节点是否已引导或加入集群？",
    "no rules": "没有加载任何规则。请把 .lua 规则文件放入该节点的规则目录。",
    "no channels": "该节点没有配置通道。", "no alerts": "没有告警，一切正常。",
    "no runs": "还没有运行。规则到点或任务到期时会出现。",
    "no deliveries": "还没有投递。", "no match": "没有符合筛选条件的投递。",
    "no tasks": "没有 API 任务。", "no tasks state": "没有{state}的任务。",
    "nothing today": "今天还没有规划或发送任何消息。", "nothing on": "{date} 没有规划任何消息。",
    "no sends": "这一天还没有发送。", "no lateness": "还没有可统计的发送。",
    "no upcoming": "没有定时规则。", "none missed": "到目前为止每个计划时刻都已触发。",
    "could not refresh": "刷新失败：", "not answering": "该节点的 API 没有响应：",
    "showing from": "——显示的是 {at} 的数据。", "stale since": "自 {at} 起未更新", "no data": "无数据", updated: "更新于 {at}",
    footer: "时间均为 {zone}；鼠标悬停可查看 RFC 3339 原值。每 {s} 秒刷新一次。",
    "cannot reach": "无法连接节点（{why}）", "not json": "返回的不是 JSON",
    "search placeholder": "用户 ID 或姓名，例如 lina 或 李娜", search: "查找",
    "person none": "{date} 没有发给 {who} 的消息。", "person found": "{who} — {date}：共 {n} 条",
    "type a name": "输入用户 ID 或姓名，查看某一天发给此人的全部消息。",
    "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", max: "最大", estimated: "按粗粒度分桶估算（旧版本记录的数据）",
    "precise": "根据记录的时间计算，误差 {pct} 以内",
    "chart axis": "分钟（{zone}）", "failures red": "失败（红色）", "next fires": "下次触发", schedule: "计划",
    "missed slot": "{rule}：计划时刻 {slot} {state}", "more missed": "另有 {n} 个",
    confirm: "确认", cancel: "取消", done: "完成", "action failed": "失败：{why}",
    fire: "立即触发", "fire q": "立即触发规则 {rule}？每位收件人都会收到一条消息（额外运行一次）。",
    "fire ok": "规则 {rule} 已触发：运行 {run}。", "fire ok paused": "规则 {rule} 已触发：运行 {run}。该规则已暂停：消息将在恢复后发出。",
    "ack q": "确认这条告警？它会保留在列表中，消息内容变化时会重新打开。",
    "ack ok": "告警已确认。",
    retry: "重发", "retry q": "现在重新发送这条{state}的消息给 {who}（使用相同的幂等键）？",
    "retry ok": "已安排重发：{n} 条消息将再次发送。",
    recall: "撤回", "recall q": "从 {who} 的会话中撤回这条消息？（企业微信应用消息，24 小时内）",
    "recall ok": "已撤回。", "recall pending": "已请求撤回，渠道尚未答复。", "recalled by": "由 {by} 撤回于 ",
    recalled: "已撤回", awaiting_approval: "待审批", rejected: "已驳回",
    clicks: "卡片点击", "click text": "{who} 点击了「{key}」", "card pending": "卡片待更新",
    "card updated": "卡片已更新", "card failed": "卡片未能更新",
    approve: "批准", reject: "驳回", "approval text": "等待审批：{n} 人（超过 {over}）。第一条消息：",
    "approve q": "批准运行 {run}？{n} 人将收到所示消息。", "approve ok": "已批准：{n} 条消息放行。",
    "reject q": "驳回运行 {run}？{n} 条消息都不会发送。", "reject ok": "已驳回：{n} 条消息已取消。",
    pause: "暂停", resume: "恢复", "pause q": "暂停规则 {rule}？其计划时刻将记录为已暂停，未发送的消息会等待。",
    "resume q": "恢复规则 {rule}？仍在截止时间内的消息会发出。",
    "pause ok": "规则 {rule} 已暂停。", "resume ok": "规则 {rule} 已恢复。", "reason": "原因（可选）",
    "http 503": "节点暂时无法响应（没有领导者或繁忙），请稍后重试", "http 403": "无权执行",
    "http 401": "需要令牌", "http 404": "不存在", "http 409": "冲突",
    "wall title": "Herald — {date}",
    "alert.delivery_failed": "投递失败", "alert.delivery_expired": "投递过期",
    "alert.slot_skipped": "计划时刻被跳过", "alert.channel_config": "通道配置错误",
    "alert.send_stuck": "发送卡住", "alert.rule_error": "规则出错", "alert.run_late": "运行延迟",
    "alert.compensation_error": "补偿失败", "alert.other": "告警",
    "alertx.delivery_failed": "{rule}：发给 {recipient} 的消息（运行 {run}）尝试 {count} 次后失败：[{code}] {error}",
    "alertx.delivery_expired": "{rule}：发给 {recipient} 的消息（运行 {run}）到截止时间仍未发出，已过期",
    "alertx.slot_skipped": "{rule}：计划时刻 {slot} 错过了补发窗口，已跳过",
    "alertx.channel_config": "通道 {channel} 配置错误（{code}）：{error}",
    "alertx.send_stuck": "通道 {channel} 上的一次发送超过了认领时限（{late}），将以相同幂等键重发",
    "alertx.rule_error": "规则 {rule} 规划运行 {run} 时出错：{error}",
    "alertx.run_late": "运行 {run} 在计划时刻之后 {late} 仍在规划中",
    "alertx.compensation_error": "规则 {rule} 的 on_failed 在处理发给 {recipient} 的消息时出错：{error}",
    "alert.quiet_expired": "免打扰导致过期", "alert.rules_mismatch": "规则集不一致",
    "alert.rule_broken": "规则文件出错", "alert.channel_down": "通道不可用", "alert.directory": "通讯录",
    "alert.digest_error": "汇总消息生成失败", "alert.clock_skew": "时钟偏差", "alert.disk_write": "磁盘写入失败",
    "alertx.clock_skew": "{nodes} 的时钟与多数节点的时钟相差超过允许的最大偏差：{error}",
    "alertx.disk_write": "节点 {nodes} 自 {since} 起无法写入其数据目录（{error}）。在恢复写入之前，它不会存储新的 Raft 日志条目：请清理其数据目录所在磁盘的空间或更换磁盘。",
    "alertx.digest_error": "规则 {rule} 无法为发给 {recipient} 的 {count} 条消息生成汇总（{error}）；它们将逐条发送",
    "alertx.quiet_expired": "{rule}（运行 {run}）的 {count} 条消息落在免打扰时段内，而该时段在截止时间之后才结束；它们将过期未发",
    "alertx.rules_mismatch": "自 {since} 起各节点的规则集不一致：{error}。请把同一个规则目录部署到每个节点。",
    "alertx.rule_broken": "规则文件 {file} 在 {nodes} 上出错：{error}。仍在运行其上一个正确版本。",
    "alertx.channel_down": "通道 {channel} 自 {since} 起不可用：{error}。其消息会等待，并在截止时间过期。",
    "alert count": "×{n}",
    "token button": "令牌…", "token title": "输入另一个 API 令牌", "token heading": "API 令牌", "token label": "令牌", "use token": "使用此令牌",
    audit: "审计记录", "audit count": "最近 {n}{more} 条", "no audit": "还没有写操作记录。",
    when: "时间", actor: "操作者", remote: "来源", via: "经 {node} 转发", action: "操作", target: "对象", node: "节点",
  },
};

// pickLang: the operator's choice kept in this browser, else the
// browser's first language.
function pickLang() {
  let saved = "";
  try { saved = localStorage.getItem(LANG_KEY) || ""; } catch (_) { /* storage off */ }
  if (WORDS[saved]) return saved;
  const langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"];
  return String(langs[0]).toLowerCase().startsWith("zh") ? "zh" : "en";
}

let LANG = pickLang();

function setLang(lang) {
  LANG = WORDS[lang] ? lang : "en";
  try { localStorage.setItem(LANG_KEY, LANG); } catch (_) { /* kept for this page only */ }
  document.documentElement.lang = LANG === "zh" ? "zh-CN" : "en";
}

// t translates key, filling {name} from params. A missing key shows the
// key itself, so a gap is visible rather than blank.
function t(key, params) {
  const words = WORDS[LANG] || WORDS.en;
  let s = words[key] ?? WORDS.en[key] ?? key;
  for (const [k, v] of Object.entries(params || {})) s = s.split("{" + k + "}").join(v == null ? "" : String(v));
  return s;
}

// translateStatic fills every element marked data-i18n (text) or
// data-i18n-placeholder / data-i18n-title (attributes) in the page.
function translateStatic() {
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll("[data-i18n-title]")) el.title = t(el.dataset.i18nTitle);
  document.title = t("title");
}
