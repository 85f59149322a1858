// Entry of the load generator process (see loadgen.ts), started by the bench with an IPC channel.
import { execute, halt, type LoadgenCommand, type RecordsResult, type RequestRecord } from './loadgen.ts';

async function main(): Promise<void> {
  if (!process.send) throw new Error('the load generator is started by `baton bench`');
  // The bench is gone (even killed): so is the load.
  process.on('disconnect', () => process.exit(0));
  let lastRecords = new Map<string, RequestRecord>();
  process.on('message', (msg: LoadgenCommand) => {
    if (msg.type === 'stop') process.exit(0);
    if (msg.type === 'halt') return halt();
    if (msg.type === 'records') {
      const records = msg.rids.map((r) => lastRecords.get(r)).filter((r): r is RequestRecord => r !== undefined);
      const reply: RecordsResult = { type: 'records', id: msg.id, records };
      process.send!(reply);
      return;
    }
    void execute(msg).then(({ result, records }) => {
      lastRecords = records;
      process.send!(result);
    });
  });
  process.send({ type: 'ready' });
}

await main();
