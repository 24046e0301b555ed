// A ShopNest agent's trace made with the official OpenTelemetry JS SDK and sent by its OTLP/HTTP exporter
// (OTLP/JSON, a body of no announced length): GenAI conventions, two tool spans started in the same
// millisecond, listed in the batch in the opposite order to the one the model asked for them.
// Usage: node agent.mjs ENDPOINT TOKEN DATASET  (prints the trace id)
import { context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

const [url, token, dataset] = process.argv.slice(2);
const exporter = new OTLPTraceExporter({ url, headers: { Authorization: `Bearer ${token}`, 'X-Evalhub-Dataset': dataset } });
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'shopnest-support-js' }),
  spanProcessors: [new BatchSpanProcessor(exporter)],
});
const tracer = provider.getTracer('shopnest');
const text = (role, content) => ({ role, parts: [{ type: 'text', content }] });
const question = 'Where is my order A-2001? If it has not shipped, cancel it please.';
const answer = 'Order A-2001 had not shipped, so I cancelled it.';
const calls = [
  { type: 'tool_call', id: 'call_1', name: 'getOrderStatus', arguments: { order_id: 'A-2001' } },
  { type: 'tool_call', id: 'call_2', name: 'cancelOrder', arguments: { order_id: 'A-2001' } },
];

const root = tracer.startSpan('invoke_agent shopnest', { attributes: { 'gen_ai.operation.name': 'invoke_agent' } });
const inRoot = trace.setSpan(context.active(), root);
const t0 = Date.now();
const chat = tracer.startSpan('chat gpt-4o-mini', { startTime: t0, attributes: {
  'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o-mini',
  'gen_ai.input.messages': JSON.stringify([text('user', question)]),
  'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: calls }]),
} }, inRoot);
chat.end(t0 + 1);
const results = { getOrderStatus: { status: 'processing' }, cancelOrder: { cancelled: true } };
// Both tools start in the same millisecond; cancelOrder's span is started (and listed) first.
const tools = ['cancelOrder', 'getOrderStatus'].map((name) => tracer.startSpan(`execute_tool ${name}`, {
  startTime: t0 + 2, attributes: {
    'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name,
    'gen_ai.tool.call.arguments': JSON.stringify({ order_id: 'A-2001' }),
    'gen_ai.tool.call.result': JSON.stringify(results[name]),
  } }, inRoot));
tools.forEach((span) => span.end(t0 + 3));
const final = tracer.startSpan('chat gpt-4o-mini', { startTime: t0 + 4, attributes: {
  'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o-mini',
  'gen_ai.output.messages': JSON.stringify([text('assistant', answer)]),
} }, inRoot);
final.end(t0 + 5);
root.end(t0 + 6);
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify([root.spanContext().traceId]));
