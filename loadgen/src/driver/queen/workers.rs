//! Queen's wire as the workers' calls: each producer and consumer gets its own connection to
//! the cell's brokers (`[broker] routing`), its pushes written by `push`, its pops and acks by
//! `pop`.

use crate::workload::calls::Workers;
use crate::workload::plan::ConsumerPlan;
use crate::workload::plan::ProducerPlan;
use crate::workload::CellContext;

use super::pop::HttpConsumer;
use super::push::{HttpProducer, PushWriter};

/// The HTTP workers of a broker cell (the brokers are the cell context's fleet).
pub struct HttpWorkers;

impl Workers for HttpWorkers {
    type Producer = HttpProducer;
    type Consumer = HttpConsumer;

    async fn producer(
        &self,
        plan: &ProducerPlan,
        ctx: &CellContext,
    ) -> Result<HttpProducer, String> {
        Ok(HttpProducer {
            conn: ctx.connection(plan.id),
            writer: PushWriter::new(plan),
        })
    }

    async fn consumer(
        &self,
        plan: &ConsumerPlan,
        ctx: &CellContext,
    ) -> Result<HttpConsumer, String> {
        Ok(HttpConsumer::new(plan, ctx.connection(plan.id)))
    }
}
